"""The words of the grader's scripts: helpers' own ``helpers.i18n`` (msg, localize), loaded
without the rest of helpers.

The grader writes every message about a submission in the language of the edition it comes
from (scripts/grade.py's docstring), through helpers' message catalogue
(helpers/locales/ko.po; scripts/helpers_i18n.py reads the templates of the grader's
``msg(...)`` calls). ``import helpers.i18n`` would first run ``helpers/__init__.py``, which
imports every module of the book (numpy, matplotlib: about 3 s), in processes that need
none of it: the grader's parent process and Gradescope's ``run``. So ``helpers/i18n.py``
(standard library only) is loaded here from its file, as the module ``helpers.i18n``:
when a process then imports ``helpers`` (the grader's worker, to run the self-checks), the
package finds this same module, with its language, and :func:`attach` makes it the
package's attribute too.
"""

from __future__ import annotations

import importlib.util
import sys

NAME = "helpers.i18n"


def _load():
    if NAME in sys.modules:  # helpers is imported already, or this ran before
        return sys.modules[NAME]
    if "helpers" in sys.modules:
        return importlib.import_module(NAME)
    package = importlib.util.find_spec("helpers")  # finds it; runs nothing of it
    if package is None or not package.submodule_search_locations:
        raise ImportError("the grader needs the book's helpers package (make book installs it)")
    location = next(iter(package.submodule_search_locations))
    spec = importlib.util.spec_from_file_location(NAME, f"{location}/i18n.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    return module


def attach() -> None:
    """After ``import helpers``: make this module its attribute ``helpers.i18n`` (the
    import system sets it only on a submodule it loads itself)."""
    package = sys.modules.get("helpers")
    if package is not None and getattr(package, "i18n", None) is not sys.modules[NAME]:
        package.i18n = sys.modules[NAME]


i18n = _load()
LANGUAGES = i18n.LANGUAGES
Msg = i18n.Msg
localize = i18n.localize
msg = i18n.msg
set_language = i18n.set_language
