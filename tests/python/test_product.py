"""The seed's program, examples/python/product.py, and every way it is run: the launcher
(`osprey product.py --run`), `python3 -m osprey`, and plain python3; its output exactly; its
errors in the CLI's words."""

import pytest

from conftest import LAUNCHER, PYTHON, SOURCE_DIR, cli_error, cuda_usable, run

PRODUCT = SOURCE_DIR / "examples" / "python" / "product.py"


def ways_to_run(program, *more):
    ways = [[PYTHON, "-m", "osprey", program, "--run", *more], [PYTHON, program, *more]]
    if LAUNCHER:
        ways.insert(0, [LAUNCHER, program, "--run", *more])
    return ways


@pytest.mark.parametrize("way", range(3))
def test_prints_host_first_element_7(way):
    ways = ways_to_run(PRODUCT)
    if way >= len(ways):
        pytest.skip("no launcher (OSPREY_PYTHON_LAUNCHER)")
    done = run(ways[way], {"OSPREY_GPU": "host"})
    assert done.stderr == b""
    assert done.stdout == b"host: first element = 7.0\n"
    assert done.returncode == 0


def test_host_is_the_default_device():
    done = run([PYTHON, PRODUCT], {"OSPREY_GPU": None})
    assert done.stdout == b"host: first element = 7.0\n"


def test_the_launcher_runs_without_run_too():
    if not LAUNCHER:
        pytest.skip("no launcher (OSPREY_PYTHON_LAUNCHER)")
    done = run([LAUNCHER, PRODUCT], {"OSPREY_GPU": "host"})
    assert done.stdout == b"host: first element = 7.0\n"


def test_an_unknown_device_is_the_clis_error():
    done = run([PYTHON, "-m", "osprey", PRODUCT, "--run"], {"OSPREY_GPU": "tpu"})
    assert done.returncode == 1
    expected = cli_error("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi",
                         env_changes={"OSPREY_GPU": "tpu"})
    assert expected == "unknown gpu device `tpu` (OSPREY_GPU): choose host, cuda or opencl"
    assert done.stderr.decode() == f"error: {expected}\n"
    assert done.stdout == b""


def test_cuda_without_a_gpu_is_an_error_not_the_host():
    if cuda_usable():
        pytest.skip("a CUDA device is here: test_cuda.py runs the program on it")
    done = run([PYTHON, "-m", "osprey", PRODUCT, "--run"], {"OSPREY_GPU": "cuda"})
    assert done.returncode == 1
    assert done.stdout == b"", "no quiet run on the host"
    expected = cli_error("logits", "--backend", "gpu", "--preset", "tiny", "--prompt", "hi",
                         env_changes={"OSPREY_GPU": "cuda"})
    assert done.stderr.decode() == f"error: {expected}\n"


def test_a_missing_program_is_said_so():
    done = run([PYTHON, "-m", "osprey", SOURCE_DIR / "no-such-program.py", "--run"])
    assert done.returncode == 2
    assert b"osprey: error: no such program:" in done.stderr


def test_the_program_sees_its_own_arguments(tmp_path):
    program = tmp_path / "args.py"
    program.write_text("import sys\nprint(sys.argv[1:])\n")
    done = run([PYTHON, "-m", "osprey", program, "--run", "a", "--b"])
    assert done.stdout == b"['a', '--b']\n"
