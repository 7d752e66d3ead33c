"""The exporter listens on loopback unless told otherwise: a scrape from another host needs an
address given on purpose."""
import pytest

from pinmon.cli.main import build_parser
from pinmon.export import server as export

pytestmark = pytest.mark.hardening


def test_exporter_listens_on_loopback_by_default():
    assert export.DEFAULT_LISTEN.startswith("127.0.0.1:")
    args = build_parser().parse_args(["export"])
    assert args.listen[0] == "127.0.0.1"
