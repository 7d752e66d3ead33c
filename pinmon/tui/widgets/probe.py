"""Probe results: pinned vs pageable copies, speedup, share of the link; measured on this box live,
on the recorded host in a replay (the title says which).

With no probe engine the panel says why and shows no numbers: a made-up figure here would be
read as a measurement. Beside a result stands the link traffic the collector read while the probe
ran, and a warning where other traffic shared the link (``probe_link``).
"""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import ProgressBar

from ...model import EXACT_PCIE_METHODS, ProbeResult
from ...units import fmt_bytes, fmt_pct, fmt_rate, fmt_ratio, fmt_seconds, printable
from ..view.format import fmt_time, other_measurements, probe_rows, sweep_sizes
from ..view.shared_link import shared_directions
from ..view.state import ProbeView, ViewState
from .base import CompositeView, NoLinks, TextBlock, View, lines, set_content


def shared_row(result: ProbeResult) -> Content | None:
    """Where other traffic clearly shared the link while the probe ran: by how much, and which
    directions' figures read low (what the other job left, not what the link gives)."""
    shared = shared_directions(result) if result.status == "ok" else {}
    if not shared:
        return None
    others = ", ".join(f"{'RX' if d == 'h2d' else 'TX'} ~{fmt_rate(r)}" for d, r in shared.items())
    which = " and ".join(d.upper() for d in shared)
    return Content.assemble(("! link shared: ", "bold $warning"), f"other {others}; ",
                            (f"{which} figures read low", "$warning"))


def link_rows(result: ProbeResult, pending: bool = False) -> list[Content]:
    """The link's traffic while the probe ran (the probe's own included), then ``shared_row``."""
    if result.status != "ok":
        return []
    if result.link_window_s is None:
        return [Content.styled("link during probe: waiting for the next reading", "dim")] if pending else []
    if result.link_rx_bytes_per_s is None or result.link_tx_bytes_per_s is None:
        return [Content.styled("link during probe: no reading of this GPU's link", "dim")]
    how = "exact" if result.link_method in EXACT_PCIE_METHODS else "est."
    shared = shared_row(result)
    return [Content.assemble("link during probe: ", ("RX ", "bold"), fmt_rate(result.link_rx_bytes_per_s),
                             ", ", ("TX ", "bold"), fmt_rate(result.link_tx_bytes_per_s),
                             (f" ({how}, incl. the probe's own)", "dim"))] + ([shared] if shared else [])


# A probe table this narrow or narrower takes the short form (the overview's column at 120x30).
SHORT_TABLE_CELLS = 60


def result_head(result: ProbeResult, recorded: bool, width: int | None = None) -> Content:
    """"quick probe, GPU 0, 2026-12-03 07:19:28, took 175.8 ms (from the recording)", shorter
    where ``width`` is less: without the date, then without the duration."""
    where = "GPU n/a" if result.gpu_index is None else f"GPU {result.gpu_index}"
    took = f", took {fmt_seconds(result.duration_s)}" if result.duration_s is not None else ""
    for with_date, with_took, tag in ((True, True, " (from the recording)"), (False, True, " (recorded)"),
                                      (False, False, " (recorded)")):
        head = Content.assemble((f"{printable(result.kind, 20)} probe", "bold"),
                                f", {where}, {fmt_time(result.time, with_date=with_date)}",
                                took if with_took else "", (tag, "dim") if recorded else "")
        if not width or head.cell_length <= width:
            break
    return head


def result_rows(result: ProbeResult, link_bytes_per_s: float | None, recorded: bool,
                width: int | None = None) -> list[Content]:
    """The probe's table: pinned and pageable copy rates per direction, the speedup, and the
    pinned copies' payload as a share of the link's rate (the GPU rows' share counts link bytes,
    headers included; see the help). Narrower than ``SHORT_TABLE_CELLS``: shorter headings."""
    head = result_head(result, recorded, width)
    if result.status != "ok":
        return [head, Content.assemble(("probe did not run: ", "$warning"),
                                       printable(result.reason or "no reason given", 400))]
    short = bool(width and width < SHORT_TABLE_CELLS)
    rate, share_cells, share_head = (10, 8, "of link") if short else (11, 19, "payload % of link")
    rows = [head,
            Content.styled(f"{'':<4} {'pinned':>{rate}} {'pageable':>{rate}} {'speedup':>8}"
                           f"{share_head:>{share_cells}}", "bold")]
    for r in probe_rows(result, link_bytes_per_s):
        slow = r.speedup is not None and r.speedup >= 1.5
        rows.append(Content.assemble(
            (f"{r.direction.upper():<4}", "bold"), f" {fmt_rate(r.pinned_bytes_per_s):>{rate}}",
            f" {fmt_rate(r.pageable_bytes_per_s):>{rate}}",
            (f" {fmt_ratio(r.speedup):>8}", "bold $warning" if slow else ""),
            f"{fmt_pct(r.pinned_share_of_link):>{share_cells}}"))
    link = result.link_theoretical_bytes_per_s or link_bytes_per_s
    cap = f", pinned buffers capped at {fmt_bytes(result.max_pinned_bytes)}" if result.max_pinned_bytes else ""
    rows.append(Content.styled(f"% of link: the pinned copies' payload against the link's {fmt_rate(link)}"
                               f" (the GPU rows count link bytes, headers included){cap}", "dim"))
    return rows


def sweep_rows(result: ProbeResult) -> list[Content]:
    sizes = sweep_sizes(result)
    if len(sizes) < 2:
        return []
    rows = [Content.styled(f"{'size':>10} {'H2D pin':>10} {'H2D page':>10} {'D2H pin':>10} {'D2H page':>10}", "bold")]
    for size in sizes:
        cells = [fmt_rate(result.rate(d, m, size)) for d in ("h2d", "d2h") for m in ("pinned", "pageable")]
        rows.append(Content(f"{fmt_bytes(size):>10} " + " ".join(f"{c:>10}" for c in cells)))
    return rows


def duty_row(p: ProbeView) -> Content:
    if not p.count:
        return Content.styled("probe duty cycle: no probe run yet", "dim")
    return Content.assemble("probe duty cycle ", (fmt_pct(p.duty_cycle, 2), "bold"),
                            f" ({fmt_seconds(p.probe_seconds)} probing in {fmt_seconds(p.wall_seconds)},"
                            f" {p.count} run{'s' if p.count != 1 else ''})")


def probe_title(live: bool, host: str | None = None) -> str:
    """The Probe tab's title: where the figures were measured. A replay's come from the host and
    the time of the recording, not from the machine that plays it."""
    if live:
        return "Probe: measured on this box"
    return f"Probe: measured on {printable(host, 64)} when it was recorded (not this box)"


class ProbePanel(Vertical, CompositeView):
    """The progress bar exists only while a probe runs: an idle ProgressBar still animates its
    indeterminate bar 15 times a second (hidden or not), the app's largest cost on an idle box."""

    _bar: ProgressBar | None = None

    def compose(self) -> ComposeResult:
        yield TextBlock(id="probe-progress-label")
        yield TextBlock(id="probe-body")

    def draw(self, state: ViewState) -> None:
        p = state.probe
        host = state.snapshot.host.hostname if state.snapshot is not None else None
        self.border_title = probe_title(state.live, host)
        running = p.running_kind is not None
        label = self.query_one("#probe-progress-label", TextBlock)
        body = self.query_one("#probe-body", TextBlock)
        label.display = running
        if running:
            set_content(label, Content.assemble((f"{printable(p.running_kind, 20)} probe running", "bold $accent"),
                                                f"  {printable(p.progress_label, 100)}" if p.progress_label else ""))
            if self._bar is None:
                self._bar = ProgressBar(id="probe-progress", show_eta=False)
                self.mount(self._bar, before=body)
            self._bar.update(total=p.progress_total, progress=p.progress_done or 0)
        elif self._bar is not None:
            self._bar.remove()
            self._bar = None
        set_content(body, lines(*probe_body(state)))


def probe_body(state: ViewState) -> list[Content]:
    p = state.probe
    sel = state.selected
    link = sel.link.theoretical_bytes_per_s if sel is not None else None
    recorded = state.snapshot.probe if state.snapshot is not None else None
    latest = p.latest or recorded
    rows: list[Content] = []
    if latest is not None:
        rows += result_rows(latest, link, recorded=p.latest is None)
        rows += link_rows(latest, pending=p.link_pending and latest is p.latest)
        sweep = p.latest_sweep or (recorded if recorded is not None and recorded.kind == "sweep" else None)
        if sweep is not None and sweep_rows(sweep):
            rows += [Content(""), Content.assemble(("sweep", "bold"), f", {fmt_time(sweep.time)}")] + sweep_rows(sweep)
        other = other_measurements(latest)
        if other:
            rows += [Content("")] + [Content(o) for o in other]
    elif p.unavailable_reason is not None or not p.live:
        rows.append(Content.assemble(("no probe results", "bold"), ": ",
                                     printable(p.unavailable_reason, 400) if p.live else "this recording carries none"))
        rows.append(Content.styled("pinned-vs-pageable numbers need CuPy and an NVIDIA GPU on this machine;"
                                   " nothing is shown rather than a guess.", "dim"))
    else:
        rows.append(Content.styled("no probe yet: p runs a quick probe, s a size sweep", "dim"))
    if p.live and p.unavailable_reason is None:
        rows += [Content(""), duty_row(p),
                 Content.styled("p: quick probe (pinned vs pageable, selected GPU)   s: size sweep", "dim")]
    elif not p.live:
        rows += [Content(""), Content.styled("probes run only live, not in replay", "dim")]
    return rows


class ProbeSummary(NoLinks, TextBlock, View):
    """The latest probe in a few lines, for the overview on large terminals."""

    _state: ViewState | None = None

    def on_resize(self) -> None:
        if self._state is not None:
            self.show(self._state)  # the table's headings follow the width

    def show(self, state: ViewState) -> None:
        self._state = state
        p = state.probe
        recorded = state.snapshot.probe if state.snapshot is not None else None
        latest = p.latest or recorded
        sel = state.selected
        rows: list[Content] = []
        if p.running_kind is not None:
            done = "" if not p.progress_total else f" {fmt_pct((p.progress_done or 0) / p.progress_total)}"
            rows.append(Content.styled(f"{printable(p.running_kind, 20)} probe running{done}", "bold $accent"))
        if latest is not None:
            # Without the last row (what the share means: the panel's title says it): the overview
            # has little room.
            width = self.content_size.width if self.is_mounted else None
            rows += result_rows(latest, sel.link.theoretical_bytes_per_s if sel else None, p.latest is None,
                                width or None)[:-1]
            shared = shared_row(latest)
            if shared is not None:
                rows.append(shared)
        elif p.live and p.unavailable_reason is not None:
            rows.append(Content.assemble(("no probe results: ", "bold"), printable(p.unavailable_reason, 400)))
        else:
            rows.append(Content.styled("no probe yet (p: quick probe, s: sweep)" if p.live else
                                       "this recording carries no probe result", "dim"))
        if p.live and p.unavailable_reason is None and p.count:
            rows.append(duty_row(p))
        set_content(self, lines(*rows))
