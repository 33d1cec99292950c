"""The built-in plug-in classes, found from what their packages export.

Shared by the contract suites (tests/mechanisms/test_contract.py,
tests/adversaries/test_contract.py) and the check of the docs table
(tests/mechanisms/test_exports.py), so that none of them lists the classes by hand.
"""

from __future__ import annotations

import inspect
from types import ModuleType


def exported_classes(package: ModuleType, base: type) -> list[type]:
    """The concrete subclasses of `base` that `package` exports, in `__all__` order."""
    return [
        cls
        for name in package.__all__
        if inspect.isclass(cls := getattr(package, name))
        and issubclass(cls, base)
        and not inspect.isabstract(cls)
    ]


def own_examples(cls: type) -> dict:
    """`cls.contract_examples()`, checked: the class defines it itself (a subclass does not
    pass on its parent's, each is checked as its own class), it is not empty, and every
    value is an instance of exactly `cls`."""
    assert "contract_examples" in vars(cls), f"{cls.__name__} defines no contract_examples()"
    built = cls.contract_examples()
    assert built, f"{cls.__name__}.contract_examples() is empty"
    for key, value in built.items():
        assert type(value) is cls, f"{cls.__name__} example {key!r} is a {type(value)}"
    return built
