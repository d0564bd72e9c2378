"""Results of the GPU surface's fallible calls, which Python 3.10+ `match` takes apart by keyword.

    match toGpu([1.0, 2.0, 3.0, 4.0]):
        case Success(value=buffer): ...
        case Error(message=message): ...

Every other failure in the module raises OspreyError with the same message.
"""

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class OspreyError(RuntimeError):
    """A failure Osprey reports (the library's Error message, as the CLI prints it)."""


@dataclass(frozen=True)
class Success(Generic[T]):
    """The value of a call that worked."""

    value: T

    __match_args__ = ("value",)  # `case Success(buffer)` as well as `case Success(value=buffer)`
    ok = True

    def unwrap(self) -> T:
        """The value."""
        return self.value


@dataclass(frozen=True)
class Error:
    """Why a call did not work, in words a user can act on."""

    message: str

    __match_args__ = ("message",)
    ok = False

    def unwrap(self) -> Any:
        """Raises OspreyError with the message: for code that would rather not match."""
        raise OspreyError(self.message)

