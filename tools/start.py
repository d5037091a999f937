"""Set up the course and open it in JupyterLab: one command, on Linux, macOS and Windows.

    python3 tools/start.py          (Windows: py tools\\start.py)

1. Creates the virtual environment .venv at the repository root (unless one is active already, or on
   Colab, whose Python already holds torch), so nothing is installed into the system's Python.
2. On Linux or Windows without an NVIDIA GPU, installs PyTorch's CPU build first: pip's default torch
   on Linux is the CUDA build (about 3 GB of nvidia packages, useless without a GPU). macOS wheels are
   CPU/MPS anyway, and a machine with an NVIDIA GPU gets the CUDA build it can use.
3. Installs requirements.txt: the course's package `course_utils` (editable), JupyterLab, the tests; on Linux
   also the [triton] extra (lesson 13's kernel; a CUDA torch brings Triton already), unless Triton is there.
4. Opens JupyterLab at the repository root (notebooks/ and solutions/ both in its file browser) with
   lesson 00 open; adds --allow-root when run as root (containers, some cloud VMs).

Steps 1-3 run once: a later run finds .venv set up for the current pyproject.toml and requirements.txt
and only opens JupyterLab. Options: --setup-only, --reinstall, --cpu / --gpu (which torch build);
any other option goes to `jupyter lab` (e.g. --no-browser --port 8890). Plain Python, no dependencies.
"""
import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
LESSON_00 = "notebooks/00_welcome.ipynb"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAMP = "course-setup.txt"  # inside the environment: which requirements it was set up for


def say(text):
    print(f"[start] {text}", flush=True)


def run(cmd, on_failure=None):
    say(" ".join(str(c) for c in cmd))
    if subprocess.call([str(c) for c in cmd], cwd=ROOT) != 0:
        sys.exit(on_failure or f"[start] this step failed: {' '.join(str(c) for c in cmd)}")


CPU_INDEX_FAILED = f"""[start] PyTorch's CPU build could not be installed from {CPU_INDEX}
        (pip's message is above: the index may be unreachable from this network, or blocked by a proxy).
        Ways forward:
        - run this command again when that address can be reached (nothing else was installed);
        - or install pip's default torch instead: python3 tools/start.py --gpu
          On Linux that is the CUDA build: about 2.5 GB to download (3+ GB of nvidia packages installed);
          it runs on a CPU too. On macOS and Windows pip's default torch is the CPU build anyway.
        - or install a torch wheel you have (pip install /path/to/torch-*.whl) into {VENV}, then run this
          command again: an installed torch is kept."""


def on_colab():
    return "COLAB_RELEASE_TAG" in os.environ or "COLAB_GPU" in os.environ


def venv_python(venv):
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def environment():
    """(python, folder for the stamp): the active virtual environment, Colab's Python, or .venv."""
    if sys.prefix != sys.base_prefix or on_colab():
        return Path(sys.executable), Path(sys.prefix)
    python = venv_python(VENV)
    if python.exists() and subprocess.call([str(python), "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL) == 0:
        return python, VENV
    if VENV.exists():
        say(f"{VENV} is incomplete (an interrupted set-up?): creating it again")
        shutil.rmtree(VENV)
    say(f"creating the virtual environment {VENV}")
    if subprocess.call([sys.executable, "-m", "venv", str(VENV)]) != 0 or not python.exists():
        shutil.rmtree(VENV, ignore_errors=True)
        hint = (" On Debian/Ubuntu, install it first: sudo apt install python3-venv"
                if platform.system() == "Linux" else "")
        sys.exit(f"[start] Python's venv module could not create {VENV}.{hint}")
    return python, VENV


def has_nvidia_gpu():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def wants_cpu_torch(choice):
    """True when torch's CPU build must be installed before the requirements."""
    if choice:
        return choice == "cpu"
    return platform.system() in ("Linux", "Windows") and not has_nvidia_gpu()


def requirements_hash():
    digest = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def has_torch(python):
    return subprocess.call([str(python), "-c", "import torch"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) == 0


def has_triton(python):
    return subprocess.call([str(python), "-c", "import triton"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) == 0


def wants_triton(python):
    """Triton ships Linux wheels only (macOS none, Windows a separate fork); a CUDA torch brings its own."""
    return platform.system() == "Linux" and not has_triton(python)


def install_triton(python):
    """The [triton] extra (pinned in pyproject.toml). Optional: a failure only leaves lesson 13's kernel unchecked."""
    say("Linux: installing Triton for lesson 13's kernel exercise (the [triton] extra; without a GPU its "
        "interpreter runs the kernel on the CPU)")
    cmd = [python, "-m", "pip", "install", "-e", ".[triton]"]
    say(" ".join(str(c) for c in cmd))
    if subprocess.call([str(c) for c in cmd], cwd=ROOT) != 0:
        say("Triton could not be installed (pip's message is above): lesson 13's kernel check will say so in one "
            "line; everything else works. Try again with: python -m pip install -e '.[triton]'")


def set_up(python, stamp, torch_build, reinstall):
    if not reinstall and stamp.exists() and stamp.read_text().strip() == requirements_hash():
        say(f"already set up ({python}); --reinstall installs again")
        return
    pip = [python, "-m", "pip", "install"]
    if has_torch(python):
        say("torch is installed already: kept")
    elif wants_cpu_torch(torch_build):
        say("no NVIDIA GPU found: installing PyTorch's CPU build first (pip's default would be the CUDA build)")
        run(pip + ["torch", "--index-url", CPU_INDEX], on_failure=CPU_INDEX_FAILED)
    run(pip + ["-r", "requirements.txt"])
    if wants_triton(python):
        install_triton(python)
    stamp.write_text(requirements_hash() + "\n")


def lab_command(python, extra):
    cmd = [str(python), "-m", "jupyterlab", f"--ServerApp.root_dir={ROOT}",
           f"--LabApp.default_url=/lab/tree/{LESSON_00}", *extra]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        cmd.append("--allow-root")  # Jupyter refuses to run as root without it
    return cmd


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog="Other options are passed to `jupyter lab`.")
    parser.add_argument("--setup-only", action="store_true", help="set up, do not open JupyterLab")
    parser.add_argument("--reinstall", action="store_true", help="run the installs again")
    build = parser.add_mutually_exclusive_group()
    build.add_argument("--cpu", dest="torch_build", action="store_const", const="cpu",
                       help="install torch's CPU build (the default on Linux/Windows without an NVIDIA GPU)")
    build.add_argument("--gpu", dest="torch_build", action="store_const", const="gpu",
                       help="install pip's default torch (CUDA on Linux, about 2.5 GB; also the way round "
                            "an unreachable CPU index)")
    args, extra = parser.parse_known_args(argv)
    if sys.version_info < (3, 9):
        sys.exit(f"[start] the course needs Python 3.9 or newer; this is {platform.python_version()}")

    python, env_dir = environment()
    set_up(python, env_dir / STAMP, args.torch_build, args.reinstall)
    if on_colab():
        say("on Colab: open a lesson with its 'Open in Colab' badge (README); tests: COURSE_FAST=1 python -m pytest")
        return 0
    if VENV in python.parents:
        activate = r".venv\Scripts\activate" if os.name == "nt" else "source .venv/bin/activate"
        say(f"to run the tests or the command-line tools: {activate}, then e.g. COURSE_FAST=1 python -m pytest")
    if args.setup_only:
        return 0
    cmd = lab_command(python, extra)
    say(" ".join(cmd))
    os.chdir(ROOT)
    if os.name == "nt":  # no exec on Windows: wait for JupyterLab, which handles Ctrl+C itself
        lab = subprocess.Popen(cmd)
        while True:
            try:
                return lab.wait()
            except KeyboardInterrupt:
                continue
    os.execv(cmd[0], cmd)  # JupyterLab takes over this terminal (Ctrl+C stops it)


if __name__ == "__main__":
    sys.exit(main())
