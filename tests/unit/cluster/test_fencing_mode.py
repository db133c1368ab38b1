"""`--config fencing` with --instance-id: fence by writing (`epoch`) unless another mode is
named; `transactional` and `none` stay selectable, anything else is refused at start
(docs/user/cluster.md, docs/design/fencing.md)."""
from __future__ import annotations

import pytest

from coordinator.clustered import fencing_mode
from coordinator.config import CoordinatorConfig


def test_the_default_fences_by_writing():
    assert fencing_mode(CoordinatorConfig()) == "epoch"


@pytest.mark.parametrize("named, mode", [("transactional", "transactional"), (" Epoch ", "epoch"),
                                         ("none", "none")])
def test_a_named_mode_is_kept(named, mode):
    assert fencing_mode(CoordinatorConfig(fencing=named)) == mode


def test_an_unknown_mode_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match=r"fencing='txn'.*transactional, epoch, none"):
        fencing_mode(CoordinatorConfig(fencing="txn"))
