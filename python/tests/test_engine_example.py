"""examples/engine_decode.py as a test: the engine-style decode loops (xqa with speculative decoding, tree masks,
sinks, sliding window and FP8 KV; sparse MLA with top-k indices; MXFP4 MoE) captured in CUDA graphs and replayed,
each step against its fp32 reference and with no host synchronization inside a step. A few steps here; the
committed figures come from the full run (bench/run_h200.sh engine)."""

import os
import sys
import unittest

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gating import skip_unless  # noqa: E402

HAVE_CUDA = torch is not None and torch.cuda.is_available()
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


@skip_unless("gpu", HAVE_CUDA, "needs torch with CUDA")
class EngineDecodeExample(unittest.TestCase):
    def test_every_step_matches_its_reference(self):
        sys.path.insert(0, EXAMPLES)
        try:
            import engine_decode
        finally:
            sys.path.remove(EXAMPLES)
        seed = os.environ.get("KTUNE_TEST_SEED", "7")
        self.assertEqual(engine_decode.main(["--steps", "4", "--reps", "3", "--seed", seed]), 0)


if __name__ == "__main__":
    unittest.main()
