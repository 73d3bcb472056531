"""What the sandbox's and the gateway's ASGI apps share: :class:`SendFilter`, the middleware
each of their own middlewares is built on (the sandbox's ``Date`` header and slow bodies,
the gateway's arrival stamp and ``Cache-Control: no-store``).

It sits below both and imports only the standard library and the clock (Starlette's ASGI
types are read for type checking only).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ._clock import Clock

__all__ = ["SendFilter"]


class SendFilter:
    """An ASGI middleware that passes every outgoing message of an HTTP answer through
    :meth:`send`; other scopes go through untouched.

    Args:
        app: the ASGI app it wraps.
        clock: the app's clock, for a subclass that reads the time.
    """

    def __init__(self, app: ASGIApp, clock: Clock) -> None:
        self.app = app
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, partial(self.send, scope, send))

    async def send(self, scope: Scope, send: Send, message: Message) -> None:
        """Send ``message`` (changed, split or delayed) with ``send``."""
        await send(message)
