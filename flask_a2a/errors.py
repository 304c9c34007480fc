"""Deprecated: moved to :mod:`flask_a2a.protocol.errors`; this path is removed in the next release.

Import from ``flask_a2a.protocol.errors`` (or the public names from ``flask_a2a``).
"""

from .protocol.errors import *  # noqa: F403
from .protocol.errors import (
    BAD_REQUEST_TYPE as BAD_REQUEST_TYPE,
)
from .protocol.errors import (
    ERROR_DOMAIN as ERROR_DOMAIN,
)
from .protocol.errors import (
    ERROR_INFO_TYPE as ERROR_INFO_TYPE,
)
from .protocol.errors import (  # noqa: F401
    A2AError as A2AError,
)
from .protocol.errors import (
    ContentTypeNotSupportedError as ContentTypeNotSupportedError,
)
from .protocol.errors import (
    ExtendedAgentCardNotConfiguredError as ExtendedAgentCardNotConfiguredError,
)
from .protocol.errors import (
    ExtensionSupportRequiredError as ExtensionSupportRequiredError,
)
from .protocol.errors import (
    ForbiddenOriginError as ForbiddenOriginError,
)
from .protocol.errors import (
    HandlerUsageError as HandlerUsageError,
)
from .protocol.errors import (
    InternalError as InternalError,
)
from .protocol.errors import (
    InvalidAgentResponseError as InvalidAgentResponseError,
)
from .protocol.errors import (
    InvalidParamsError as InvalidParamsError,
)
from .protocol.errors import (
    InvalidRequestError as InvalidRequestError,
)
from .protocol.errors import (
    JSONParseError as JSONParseError,
)
from .protocol.errors import (
    MalformedBodyError as MalformedBodyError,
)
from .protocol.errors import (
    MethodNotAllowedError as MethodNotAllowedError,
)
from .protocol.errors import (
    MethodNotFoundError as MethodNotFoundError,
)
from .protocol.errors import (
    PayloadTooLargeError as PayloadTooLargeError,
)
from .protocol.errors import (
    PushNotificationNotSupportedError as PushNotificationNotSupportedError,
)
from .protocol.errors import (
    StreamSeatsExhaustedError as StreamSeatsExhaustedError,
)
from .protocol.errors import (
    TaskCanceled as TaskCanceled,
)
from .protocol.errors import (
    TaskInterrupted as TaskInterrupted,
)
from .protocol.errors import (
    TaskNotCancelableError as TaskNotCancelableError,
)
from .protocol.errors import (
    TaskNotFoundError as TaskNotFoundError,
)
from .protocol.errors import (
    TaskNotStored as TaskNotStored,
)
from .protocol.errors import (
    TaskSettled as TaskSettled,
)
from .protocol.errors import (
    TaskTimedOut as TaskTimedOut,
)
from .protocol.errors import (
    TaskVisibleError as TaskVisibleError,
)
from .protocol.errors import (
    UnauthenticatedError as UnauthenticatedError,
)
from .protocol.errors import (
    UnencodableDataError as UnencodableDataError,
)
from .protocol.errors import (
    UnsupportedOperationError as UnsupportedOperationError,
)
from .protocol.errors import (
    VersionNotSupportedError as VersionNotSupportedError,
)
from .protocol.errors import (
    error_class_for_code as error_class_for_code,
)
from .protocol.errors import (
    error_from_dict as error_from_dict,
)
