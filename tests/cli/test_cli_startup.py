"""The ``banditkit`` command answers ``--help`` and argument errors without importing JAX (or pandas, matplotlib):
``import banditkit`` and building the parser load only argparse, Gymnasium's registry and the CLI's own modules.

Checked in a fresh interpreter, since what a process has imported before decides what an import loads."""

import json
import subprocess
import sys

HEAVY = ("jax", "jaxlib", "flax", "optax", "pandas", "matplotlib", "scipy", "sklearn")

_PROBE = """
import json, sys
import banditkit, gymnasium
from banditkit.cli import build_parser, main
parser = build_parser()
status = main(sys.argv[1:])
print(json.dumps(dict(heavy=sorted(m for m in {heavy} if m in sys.modules), status=status,
                      registered="banditkit/Mushroom-v0" in gymnasium.registry)))
"""


def _probe(*argv: str) -> tuple[dict, str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_import_and_parser_load_no_heavy_module_and_register_the_envs():
    res, _ = _probe("data", "list", "--bogus")
    assert res["heavy"] == [] and res["registered"]
    assert res["status"] == 2


def test_an_argument_error_is_one_line_without_jax():
    res, err = _probe("compare", "--env", "mushroom", "--steps", "0")
    assert res["heavy"] == [] and res["status"] == 2
    assert err.strip().splitlines() == [
        "banditkit compare: error: argument --steps: expected a positive integer, got 0 (see banditkit compare --help)"
    ]


def test_help_lists_the_learnable_noise_backends_when_shown():
    from banditkit.cli import build_parser
    from banditkit.posteriors.noise import SUPPORTED

    text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert f"for the backends {', '.join(SUPPORTED)}" in " ".join(text.split())
