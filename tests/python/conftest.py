"""What the Python tests share: where the source tree, the CLI and the launcher are (CTest passes
them in the environment: python/CMakeLists.txt), running the CLI, and a clean OSPREY_GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("OSPREY_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CLI = os.environ.get("OSPREY_GPT2_CLI", "")
LAUNCHER = os.environ.get("OSPREY_PYTHON_LAUNCHER", "")
SHAKESPEARE = SOURCE_DIR / "data" / "tinyshakespeare.txt"
PYTHON = sys.executable


def run(args, env_changes=None, **kwargs) -> subprocess.CompletedProcess:
    """A command's exit status and output (bytes), with the environment changed as given (a value
    of None unsets the variable)."""
    env = dict(os.environ)
    for name, value in (env_changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([str(a) for a in args], env=env, capture_output=True, timeout=600, **kwargs)


def run_cli(*args, env_changes=None) -> subprocess.CompletedProcess:
    """osprey-gpt2 with these arguments."""
    if not CLI:
        pytest.skip("OSPREY_GPT2_CLI is not set (CTest sets it)")
    return run([CLI, *args], env_changes)


def cli_error(*args, env_changes=None) -> str:
    """The message of a CLI run that fails: its stderr line without `osprey-gpt2: error: `."""
    done = run_cli(*args, env_changes=env_changes)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.decode().strip().splitlines()
    prefix = "osprey-gpt2: error: "
    errors = [line[len(prefix):] for line in lines if line.startswith(prefix)]
    assert errors, done.stderr
    return errors[-1]


def cuda_usable() -> bool:
    """Whether this module was built with nvcc and a CUDA device opens."""
    import osprey

    return osprey.built_with_cuda and osprey.toGpu([1.0], device="cuda").ok


@pytest.fixture(autouse=True)
def no_device_from_environment(monkeypatch):
    """Every test starts without OSPREY_GPU (the default device, host) unless it sets one."""
    monkeypatch.delenv("OSPREY_GPU", raising=False)
