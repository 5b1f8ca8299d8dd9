#pragma once
// Symbols marked KTUNE_API are exported from libktune.so; everything else is hidden.
#define KTUNE_API __attribute__((visibility("default")))
