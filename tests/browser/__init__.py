"""A learner's path, for real: JupyterLab in headless Chromium, with ipywidgets.

One JupyterLab server runs on a fresh copy of the course (conftest.py, server.py); each test opens one
notebook in a new page (a new workspace) and drives it as a learner does, with the keyboard and
JupyterLab's menus (driver.py):

- test_widgets.py: sliders render as widgets and their output changes when they move (a minimal widget
  notebook, lesson 01 learner and solution, lesson 13's block widget); lesson 12's generation widget
  answers a typed caption start with new continuations and next-token bars.
- test_run_all.py: Kernel > "Restart Kernel and Run All Cells..." in lessons 00, 01 and 10; in lesson 10
  then the diagrams and the translation widget.
- test_exercise.py: lesson 00's first exercise answered wrong then right; the ✘ message breaks lines
  only between words.
- test_figures.py: lesson 09's diagram; lesson 11's ViT [CLS] attention figure; lesson 10's reference
  curves in fast mode.

    bash .ci/install_browser.sh                 # Debian/Ubuntu: apt-installs chromium if missing
    python -m pytest tests/browser -x -s        # screenshots in test-artifacts/browser/

Environment:
    CHROMIUM_PATH       the Chromium/Chrome binary (default /usr/bin/chromium); never downloaded
    TEST_ARTIFACTS_DIR  where screenshots and logs go (default <repo>/test-artifacts); files land in
                        its browser/ folder, named <folder>-<notebook>[-<test>]-<n>-<step>.png
    BROWSER_TEST_DISABLE_WIDGETS=1  self-test: disable the ipywidgets front end in JupyterLab; every
                        target of test_widget_renders_and_responds must then FAIL with the "shows as
                        text only" message

Chromium runs off the network (no background networking, component updates, sync) with a new empty
profile; JupyterLab runs on 127.0.0.1 with a random token, no news, no update check, a fresh
workspace, and is stopped by its process id (its kernels too) at the end.
"""
