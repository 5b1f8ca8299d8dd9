// `ktune report`: one self-contained HTML page (inline CSS + JS, no network) about a cache's contents.
//
// The page carries its data as one JSON document inside <script type="application/json">; inline JS draws the
// charts into SVG from it (per tuning key: every candidate's time, winner marked, failed and pruned candidates
// shown as such; per device: a roofline with each key's winner). Everything that comes from the cache (keys,
// configs, errors, paths) is user-influenced: it enters the page only HTML-escaped (server-side tables) or as
// JSON strings with '<', '>', '&' and U+2028/2029 escaped (so "</script>" cannot close the data block), and the
// JS writes it only through textContent / setAttribute. A Content-Security-Policy with a per-report nonce lets
// only the page's own script run and forbids every network fetch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ktune/cache_admin.hpp"

namespace ktune::cli::report {

struct Input {
  std::string search_path, generated_at, ktune_version;
  std::vector<CacheLayerSummary> layers;
  std::vector<CacheEntry> binaries;
  std::vector<CacheTuningEntry> tuning;
};

// What the page will show (the JS renders exactly these counts: the Chromium test compares them).
struct Summary {
  int64_t keys = 0;             // tuning rows
  int64_t unreadable = 0;       // rows whose candidates_json could not be read (shown with the reason)
  int64_t candidates = 0;       // bars drawn (every candidate of every readable row, failed and pruned included)
  int64_t roofline_points = 0;  // readable rows whose winner has bytes and FLOPs per call recorded
  int64_t devices = 0;          // distinct device fingerprints among tuning rows
  int64_t binaries = 0;
};

// Renders the page. `nonce` is the CSP nonce of the page's script (random per report; tests may fix it).
std::string render_html(const Input& in, const std::string& nonce, Summary* summary = nullptr);

// Helpers, exposed for the unit tests.
std::string valid_utf8(const std::string& s);         // invalid byte sequences become U+FFFD
std::string html_escape(const std::string& s);        // & < > " ' as entities (text and quoted attributes)
std::string script_json_string(const std::string& s);  // a JSON string literal safe inside <script>

}  // namespace ktune::cli::report
