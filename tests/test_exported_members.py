"""The package's public surface: every name in ``__all__`` resolves (each is imported when first
used), is this library's own, and has a docstring; nothing public is left out of ``__all__``."""

from __future__ import annotations

import inspect

import mcp_state_versions


def test_every_exported_name_resolves_and_is_documented() -> None:
    for name in mcp_state_versions.__all__:
        member = getattr(mcp_state_versions, name)
        if inspect.isclass(member) or inspect.isfunction(member):
            assert member.__module__.startswith("mcp_state_versions."), name
            assert inspect.getdoc(member), f"{name} has no docstring"


def test_no_public_name_is_left_out_of_all() -> None:
    for name in mcp_state_versions.__all__:
        getattr(mcp_state_versions, name)  # load everything, as a user's code may
    public = {
        name
        for name, member in vars(mcp_state_versions).items()
        if not name.startswith("_") and not inspect.ismodule(member)
    }
    assert public - {"annotations", "importlib", "sys", "types", "TYPE_CHECKING", "Any"} <= set(
        mcp_state_versions.__all__
    )


def test_no_public_name_is_a_subpackage_and_importing_one_changes_no_name() -> None:
    """The layers are subpackages (``agent``, ``walk``, ...): no public name may be one of
    them, since importing the subpackage would set the package's attribute to the module."""
    import pkgutil

    import mcp_state_versions.agent.publish
    import mcp_state_versions.retention.sweep
    from mcp_state_versions import publish, sweep

    layers = {info.name for info in pkgutil.iter_modules(mcp_state_versions.__path__)}
    assert layers & set(mcp_state_versions.__all__) == set()
    assert inspect.isfunction(publish) and inspect.isfunction(sweep)
    assert inspect.isfunction(mcp_state_versions.publish)
