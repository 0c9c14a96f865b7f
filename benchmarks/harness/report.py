"""One bandit experiment's result files: ``TAG.md``, ``TAG_seeds.csv``, ``TAG_curve.csv`` and ``TAG_regret.png``.

``TAG.md`` holds the table (mean ± standard error over seeds), the protocol actually run, the command that made the
table and the one for the full protocol, the machine line, and each floor with MET / NOT MET / NOT ASSESSED.  The
per-step rows are not written (tens of MB); the curve CSV keeps what the plots need.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import pandas as pd

import banditkit as bk
from benchmarks.harness import merge as merging
from benchmarks.harness import plots
from benchmarks.harness.options import CHECK
from benchmarks.harness.provenance import command_line, machine
from benchmarks.harness.tables import (
    Floor,
    commands_md,
    curve,
    machines_md,
    markdown_table,
    per_seed,
    references,
    seeds_description,
    summary,
)


def write_dataset(res, args, ds: str, env, **kwargs) -> pd.DataFrame:
    """:func:`write_outputs` of the data set ``ds`` of a suite that runs several (``--datasets``): the tag
    ``<--tag>_<ds in lower case>``, the suite's ``--out`` / ``--merge`` / ``--add-seeds``, and below the table the
    uniform-random and oracle references of ``env`` over the table's seeds (:func:`.tables.references`); ``kwargs``:
    the other arguments of :func:`write_outputs` (title, protocol, full command, notes, ...)."""
    return write_outputs(res, args.out, f"{args.tag}_{ds.lower()}", merge=args.merge, add_seeds=args.add_seeds,
                         extra_md=lambda seeds: references(env, args.steps, seeds), **kwargs)


def write_outputs(res, out: str, tag: str, *, title: str, protocol: str, full_command: str,
                  notes: Sequence[str] = (),
                  floors: Sequence[Floor] | Callable[[pd.DataFrame], Sequence[Floor]] = (),
                  order: Sequence[str] | None = None,
                  reward_fn: Callable[[pd.DataFrame], pd.Series] | None = None, reward_label: str = "cum. reward",
                  extra_md: str | Callable[[list[int]], str] = "", merge: bool = False,
                  add_seeds: bool = False) -> pd.DataFrame:
    """Write ``TAG_seeds.csv``, ``TAG_curve.csv``, ``TAG.md`` and ``TAG_regret.png`` into ``out``; the summary.

    ``merge=True`` (the suites' ``--merge``): the agents of an existing ``TAG_seeds.csv`` / ``TAG_curve.csv`` that
    this run did not run are kept (in their order, this run's agents replacing theirs in place, new ones last), the
    earlier commands and machine lines and the hand-written run notes (from the first ``**Run note`` line to the
    end) are carried into ``TAG.md``, and the plot is drawn from the merged curve.  ``floors`` may be a function of
    the (merged) summary frame, so a floor is judged on every row of the table, not only this run's.

    ``add_seeds=True`` (``--add-seeds``, implies merging): the agents run now keep their old rows as well, and
    this run's seeds are pooled with them (seed rows concatenated; the curve's mean ± s.e. combined exactly from
    both parts' counts, means and standard errors).  An agent whose old rows share a seed with this run, or ran a
    different number of rounds, raises ``ValueError`` (:func:`.merge.check_add_seeds` says so before a run starts).
    ``extra_md`` may be a function of the table's seeds (sorted), e.g. :func:`.tables.references` over all of them.
    Under ``--check`` nothing is written: the run is compared with the committed curve instead."""
    if CHECK["rounds"] is not None:
        merging.check_against_table(res, out, tag)
        return summary(per_seed(res, reward_fn), list(res.timing))
    seeds_df = per_seed(res, reward_fn)
    order = list(order) if order is not None else list(res.timing)
    cur = curve(res)
    seeds_path, curve_path = os.path.join(out, f"{tag}_seeds.csv"), os.path.join(out, f"{tag}_curve.csv")
    commands = [f"`{command_line()}`"]
    machines = [machine()]
    render = res.frame.empty and not res.timing and not res.failures  # --render: rewrite the table, run nothing
    merged = (merge or add_seeds or render) and os.path.exists(seeds_path) and os.path.exists(curve_path)
    if render and not merged:
        raise SystemExit(f"--render: no {seeds_path} / {curve_path} to rewrite the table from")
    run_notes: list[str] = []
    if merged:
        seeds_df, cur, order, old_cmds, old_machines, run_notes = merging.merge_previous(out, tag, seeds_df, cur, order,
                                                                                       add_seeds)
        how = "added seeds to" if add_seeds else "re-ran"
        commands = old_cmds + [f"{commands[0]} (with `--merge`: {how} {', '.join(sorted(set(res.timing)))})"]
        machines = old_machines + machines
        if render:
            commands, machines = old_cmds, old_machines
    if "{seeds}" in protocol:  # the table's seeds, and the last command's where they differ
        table, this = seeds_description(seeds_df), seeds_description(res.frame)
        protocol = protocol.replace("{seeds}", table)
        if merged and not render and this != table:
            protocol += f" (the last command above ran {this})"
    elif merged and not seeds_df.empty:
        counts = seeds_df.groupby("agent")["seed"].nunique()
        if counts.nunique() > 1:  # the protocol line names this run's seeds; the kept rows may have other counts
            protocol += f" (this command; the table's rows have {counts.min()}–{counts.max()} seeds, see `seeds`)"
    s = summary(seeds_df, order) if not seeds_df.empty else pd.DataFrame()
    if callable(floors):
        floors = floors(s) if not s.empty else []
    if not seeds_df.empty:
        seeds_df.to_csv(seeds_path, index=False)
        cur.to_csv(curve_path, index=False)
        png = os.path.join(out, f"{tag}_regret.png")
        if merged:
            plots.plot_curve(cur, png, title=title)
        else:
            bk.plotting.plot_regret(res.frame, png, title=title)
        import matplotlib.pyplot as plt

        plt.close("all")
    md = [f"# {title}", "", f"**Protocol run:** {protocol}", "", commands_md(commands), "",
          f"**Full protocol:** `{full_command}`", "", machines_md(machines), ""]
    md += ["Mean ± standard error over seeds. `compile s` = tracing + XLA compilation (once per agent); "
           "`run s` = execution only, all seeds together (vmapped); `ms / step` = run s / steps.", ""]
    md.append(markdown_table(s, reward_label) if not s.empty else "_no agent finished_\n")
    if res.failures:
        md += ["", "**Failed agents:**", ""]
        md += [f"- `{k}`: {v[:500]}" for k, v in res.failures.items()]
    if floors:
        md += ["", "**Floors (issue 5):**", ""]
        md += [f"- {f.description}: **{f.status}** — {f.detail}" for f in floors]
    if callable(extra_md):
        extra_md = extra_md(sorted(int(v) for v in seeds_df["seed"].unique())) if not seeds_df.empty else ""
    if extra_md:
        md += ["", extra_md]
    if notes:
        md += ["", "**Notes:**", ""] + [f"- {n}" for n in notes]
    if run_notes:
        md += [""] + run_notes
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
    return s
