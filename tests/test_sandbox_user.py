"""The sandbox as a normal user. When the tests run as root (as CI does), the attacks of test_grade_class.py
that the sandbox and its limits must stop (CHECKED) are graded by an unprivileged user (`setpriv`, a user
id that no account uses, a home folder of its own) with the `course-grade` of a clone in that home folder,
installed as the README says; the same checks then hold. When the tests run as a normal user,
test_grade_class.py is that run, and this file is skipped. Slow (RUN_SLOW=1), as the attack class is."""
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.test_grade_class import (
    CELL_TIMEOUT,
    CHECKED,
    SECRET,
    TIMEOUT,
    check_graded,
    check_io,
    check_limits,
    check_preboot,
    check_sandbox,
    grade_class,
)
from tests.test_grade_clone import grade_env, make_clone

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="the tests run as a normal user: test_grade_class.py "
                                                           "grades the attack class as one")]


def _free_uid():
    for uid in range(61100, 61200):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    pytest.skip("no free user id in 61100-61199")


def _as(uid):
    def run(argv, **kwargs):
        return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv],
                              **kwargs)
    return run


def _reachable(path):
    """True when every user may walk down to `path` (no folder on the way closed, e.g. /root)."""
    return all(parent.stat().st_mode & 0o001 for parent in Path(path).parents)


def _python_for(run, folder, ours):
    """A Python the user can make a venv with and run, of this Python's version, that reaches the course's
    dependencies in `ours` (tried in a throwaway venv in `folder`, which the user owns)."""
    probe = (f"import sys; sys.path.append({str(ours)!r}); import torch, nbclient, ipykernel; "
             "print(sys.version_info[:2])")
    candidates = (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), "/usr/bin/python3")
    for n, python in enumerate(candidates):
        venv, env = Path(folder) / f"probe{n}", {"PATH": "/usr/bin:/bin"}
        if not _reachable(python):   # (e.g. under /root)
            continue
        if Path(python).exists() and run([python, "-m", "venv", "--without-pip", str(venv)], capture_output=True,
                                         env=env, cwd="/").returncode == 0:
            done = run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=env, cwd="/")
            if done.returncode == 0 and done.stdout.strip() == str(tuple(sys.version_info[:2])):
                return python
    pytest.skip(f"no Python {sys.version_info[0]}.{sys.version_info[1]} that an unprivileged user can run with the "
                f"course's packages ({ours} must be readable by every user)")


@pytest.fixture(scope="module")
def as_a_user():
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    uid = _free_uid()
    run = _as(uid)
    base = Path(tempfile.mkdtemp(prefix="course-user-test-", dir="/tmp"))
    os.chmod(base, 0o755)
    home = base / "home"
    home.mkdir()
    os.chown(home, uid, uid)
    dependencies, mounted = Path(sysconfig.get_paths()["purelib"]), None
    try:
        if not _reachable(dependencies):   # (the course's venv under a closed folder: shown to the user read-only)
            mounted = base / "dependencies"
            mounted.mkdir()
            subprocess.run(["mount", "--bind", "-o", "ro", str(dependencies), str(mounted)], check=True)
            dependencies = mounted
        python = _python_for(run, home, dependencies)
        clone = home / "attention-course"
        make_clone(clone, python=python, run=run, owner=uid, home=home, dependencies=dependencies)

        def prepare(folder):
            for path in [folder, *folder.rglob("*")]:
                os.chown(path, uid, uid, follow_symlinks=False)

        def grade(klass, out, io_root):
            env = dict(grade_env(home, tmpdir=io_root), COURSE_INSTRUCTOR_SECRET=SECRET)
            done = run([str(clone / ".venv" / "bin" / "course-grade"), str(klass), "--out", str(out), "--jobs", "2",
                        "--timeout", str(TIMEOUT), "--cell-timeout", str(CELL_TIMEOUT), "--check-timeout", "8"],
                       cwd=str(home), env=env, capture_output=True, text=True)
            return done.returncode, (done.stdout + done.stderr).splitlines()

        grading = home / "grading"
        grading.mkdir()
        attacked = grade_class(grading, run=grade, instructor_home=home, prepare=prepare, only=CHECKED)
        yield dict(attacked, uid=uid, home=home, python=str(clone / ".venv" / "bin" / "python"))
    finally:
        if mounted is not None:
            subprocess.run(["umount", "-l", str(mounted)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_as_a_user_the_class_is_graded(as_a_user):
    check_graded(as_a_user)


def test_as_a_user_the_sandbox_is_an_allow_list(as_a_user):
    check_sandbox(as_a_user, user=as_a_user["uid"], home=as_a_user["home"], python=as_a_user["python"])


def test_as_a_user_a_fork_bomb_and_a_memory_hog_do_not_fail_the_learner_beside_them(as_a_user):
    check_limits(as_a_user)


def test_as_a_user_no_code_of_the_learners_folder_runs_before_the_grader(as_a_user):
    check_preboot(as_a_user)


def test_as_a_user_the_io_folder_is_read_only_and_the_kernels_sockets_are_reached_only_by_descriptor(as_a_user):
    check_io(as_a_user)
