import pytest

from coordinator.group import group_types
from coordinator.group.streams.model import StreamsGroup


@pytest.fixture(autouse=True)
def _unregister_streams():
    """The registry built with the streams contribution enters it in the process-wide table."""
    yield
    group_types.unregister(StreamsGroup)
