"""Deprecated: the Studio context schemas now live in ``gated_react.studio``, beside the graph
factories that read them. Importing this module warns; it will be removed in 0.3."""

from __future__ import annotations

import warnings

from gated_react.studio import RefundContext, StudioContext, WorkbenchContext

warnings.warn(
    "gated_react.studio_context is deprecated; import RefundContext, StudioContext and "
    "WorkbenchContext from gated_react.studio",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["RefundContext", "StudioContext", "WorkbenchContext"]
