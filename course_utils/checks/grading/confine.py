"""The first program run inside the sandbox, before the kernel: limits, an unprivileged user, the learner's files.

    python -I -S confine.py --processes N --memory BYTES --file-size BYTES [--uid ID] \
        --copy SUBMISSION FOLDER [--start-in HOME] -- KERNEL ARGV...

In this order: it sets the limits every process of the notebook inherits (at most N processes and threads,
BYTES of address space each, no file larger than --file-size, no core dumps); when the grader runs as root,
it gives up root for the user and group --uid (no supplementary groups; its capabilities go with it, and the
sandbox forbids gaining any back); as that user, it copies the submitted folder into the learner's folder
(in memory, bounded in size), and then it becomes the kernel (exec), in the folder --start-in (the grader
gives the sandbox's empty home folder: nothing of the learner's folder is in the kernel's way while it starts,
neither a module Python would import nor a configuration file; the grader's first cell moves it into the
learner's folder), else in the learner's folder.

It imports only the standard library, and runs with `-I -S` (nothing from the working folder, the
environment or site-packages): the grader passes it by path, from its own copy of the package.
"""
import argparse
import os
import resource
import shutil
import sys

COPY_FAILED = 75   # exit status when the submission does not fit (the grader names the learner's folder)


def limit(kind, value):
    soft, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def become(uid):
    """Give up root for `uid` (user and group): no groups, no capabilities (they are cleared by the kernel
    when every user id stops being 0; the sandbox's no_new_privs keeps them from coming back)."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise OSError(f"could not become user {uid}")


def copy_into(source, folder):
    """Copy what the folder `source` holds into the existing `folder` (links as links, never followed)."""
    for entry in os.scandir(source):
        target = os.path.join(folder, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            shutil.copytree(entry.path, target, symlinks=True)
        else:
            shutil.copy2(entry.path, target)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        print("confine: usage: confine.py OPTIONS -- KERNEL ARGV...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="confine.py")
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--file-size", type=int, required=True)
    parser.add_argument("--uid", type=int)
    parser.add_argument("--copy", nargs=2, metavar=("SOURCE", "FOLDER"), required=True)
    parser.add_argument("--start-in")
    options, command = parser.parse_args(argv[:cut]), argv[cut + 1:]
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NPROC, options.processes)
    limit(resource.RLIMIT_AS, options.memory)
    limit(resource.RLIMIT_FSIZE, options.file_size)
    if options.uid is not None:
        become(options.uid)
    source, folder = options.copy
    try:
        copy_into(source, folder)
    except (OSError, shutil.Error) as error:
        print(f"confine: the learner's folder could not be copied into the sandbox (larger than its "
              f"{options.file_size >> 20} MiB?): {str(error)[:300]}", file=sys.stderr)
        return COPY_FAILED
    os.chdir(options.start_in or folder)
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
