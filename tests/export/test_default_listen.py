"""The exporter listens on loopback unless told otherwise: a scrape from another host needs an
address given on purpose."""
import pytest

from pinmon.cli import listen as export
from pinmon.cli.main import build_parser

pytestmark = pytest.mark.hardening


def test_exporter_listens_on_loopback_by_default():
    assert export.DEFAULT_LISTEN.startswith("127.0.0.1:")
    args = build_parser().parse_args(["export"])
    assert args.listen[0] == "127.0.0.1"
