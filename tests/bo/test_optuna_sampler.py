"""``banditkit.integrations.optuna.BanditkitSampler``: Optuna studies driven by BayesOpt, in one process and in two
worker processes sharing a JournalStorage file.

Small surrogate (HiLoFi rank 2 on a 2×16 MLP, 64 candidates) and a cheap objective; the worker processes run the
same configuration as the in-process study, so they find its compiled programs in the test run's XLA cache."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from toys import REPO, TESTS_DIR  # noqa: E402

from banditkit.integrations.optuna import BanditkitSampler, to_space  # noqa: E402

SMALL = dict(features=(16, 16), surrogate_kwargs=dict(rank=2), n_candidates=64)


def objective(trial):
    """Mixed: a log-scale float, an int, a stepped float and a categorical that matters (minimum 0 at lr = 0.01,
    n = 3, s = 0.5, kind = "b")."""
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    n = trial.suggest_int("n", 1, 8)
    s = trial.suggest_float("s", 0.0, 1.0, step=0.25)
    kind = trial.suggest_categorical("kind", ["a", "b", "c"])
    return (np.log10(lr) + 2.0) ** 2 + 0.1 * (n - 3) ** 2 + (s - 0.5) ** 2 + (0.0 if kind == "b" else 2.0)


@pytest.fixture(autouse=True)
def quiet_optuna():
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(level)


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_study_minimises_and_maximises_with_typed_best_params(direction):
    sign = 1.0 if direction == "minimize" else -1.0
    sampler = BanditkitSampler(seed=0, n_startup_trials=6, **SMALL)
    study = optuna.create_study(direction=direction, sampler=sampler)
    study.optimize(lambda t: sign * objective(t), n_trials=16)
    assert len(study.trials) == 16 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    best = study.best_params
    assert type(best["lr"]) is float and type(best["n"]) is int and type(best["s"]) is float
    assert type(best["kind"]) is str and best["s"] in (0.0, 0.25, 0.5, 0.75, 1.0)
    # BO (trials 6..15) improves on the random start in the study's own direction
    values = np.array([sign * t.value for t in study.trials])
    assert values[6:].min() < values[:6].min()
    assert study.best_value == (values.min() if direction == "minimize" else -values.min()) * 1.0


def test_running_trials_are_pending_points():
    """EI is deterministic given the data: a second ask while the first trial runs proposes another point."""
    sampler = BanditkitSampler(acquisition="ei", seed=0, n_startup_trials=4, **SMALL)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=5)
    t1, t2 = study.ask(), study.ask()
    p1, p2 = (dict(lr=t.suggest_float("lr", 1e-4, 1.0, log=True), n=t.suggest_int("n", 1, 8),
                   s=t.suggest_float("s", 0.0, 1.0, step=0.25), kind=t.suggest_categorical("kind", ["a", "b", "c"]))
              for t in (t1, t2))
    assert p1 != p2
    study.tell(t1, 1.0)
    study.tell(t2, 2.0)


def test_parameters_outside_the_relative_space_fall_back(caplog):
    """A define-by-run parameter (present in some trials only) is sampled by the independent sampler."""
    def conditional(trial):
        x = trial.suggest_float("x", -1.0, 1.0)
        if x > 0:
            return x + trial.suggest_int("extra", 0, 3)
        return -x

    study = optuna.create_study(sampler=BanditkitSampler(seed=1, n_startup_trials=4, warn_independent_sampling=False,
                                                         **SMALL))
    study.optimize(conditional, n_trials=8)
    assert len(study.trials) == 8
    assert "extra" not in sampler_space(study)


def sampler_space(study):
    return study.sampler.infer_relative_search_space(study, study.trials[-1])


def test_mapping_and_errors():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    sp = to_space({"a": FloatDistribution(1e-3, 1.0, log=True), "b": IntDistribution(0, 10, step=2),
                   "c": FloatDistribution(0.0, 1.0, step=0.1), "d": CategoricalDistribution([None, 1, "x"])})
    assert sp["a"].log and sp["b"].step == 2 and sp["c"].step == 0.1 and sp["d"].choices == (None, 1, "x")
    with pytest.raises(ValueError, match="n_startup_trials"):
        BanditkitSampler(n_startup_trials=0)
    with pytest.raises(ValueError, match="sets BayesOpt's 'space' itself"):
        BanditkitSampler(space={})
    with pytest.raises(ValueError, match="unknown acquisition"):
        BanditkitSampler(acquisition="magic")
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=BanditkitSampler(
        seed=0, n_startup_trials=1, **SMALL))
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1)
    with pytest.raises(ValueError, match="multi-objective"):
        study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=1, catch=())


def test_importing_banditkit_does_not_import_optuna():
    code = "import sys, banditkit, banditkit.bo, banditkit.integrations; assert 'optuna' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})


@pytest.mark.parametrize("independent", ["random", "tpe"])
def test_two_samplers_with_one_seed_on_one_storage_propose_distinct_startup_points(independent):
    """Two workers (two samplers, the same seed) interleaving asks on one storage: the startup draws depend on the
    trial number, so no two trials share a point (one RNG stream per sampler gave both workers the same points),
    and a trial's draw is reproducible from (seed, trial number)."""
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(study_name="s", storage=storage)
    workers = [optuna.load_study(study_name="s", storage=storage, sampler=BanditkitSampler(
        seed=0, n_startup_trials=50, independent_sampler=independent, **SMALL)) for _ in range(2)]
    points = []
    for _ in range(3):
        trials = [w.ask() for w in workers]  # both running at once, as two processes would be
        for w, t in zip(workers, trials, strict=True):
            points.append((t.number, t.suggest_float("x", 0.0, 1.0), t.suggest_int("n", 1, 1000)))
            w.tell(t, points[-1][1])
    assert len({p[1:] for p in points}) == 6
    again = optuna.create_study(sampler=BanditkitSampler(seed=0, n_startup_trials=50, independent_sampler=independent,
                                                         **SMALL))
    for number, x, n in sorted(points):
        t = again.ask()
        assert t.number == number and (t.suggest_float("x", 0.0, 1.0), t.suggest_int("n", 1, 1000)) == (x, n)
        again.tell(t, x)


def test_a_running_trial_publishes_its_point_before_its_objective_suggests_it():
    """Two workers on one storage ask while the other's trial is running but has not suggested its parameters yet
    (the window in which two processes' asks overlap): the first's point is published at once, so EI — the same
    deterministic choice for both given the same data — is steered away from it by the second."""
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(study_name="s", storage=storage)
    a, b = (optuna.load_study(study_name="s", storage=storage, sampler=BanditkitSampler(
        acquisition="ei", seed=0, n_startup_trials=4, **SMALL)) for _ in range(2))
    a.optimize(objective, n_trials=4)
    ta = a.ask()
    proposal = dict(ta.relative_params)  # Optuna samples at the first suggest; this is that moment, frozen
    assert ta.params == {} and proposal  # running; its objective has not suggested anything yet
    published = storage.get_trial(ta._trial_id).system_attrs["banditkit:proposal"]
    tb = b.ask()
    pa, pb = objective(ta), objective(tb)
    assert ta.params == published == proposal and tb.params != ta.params
    a.tell(ta, pa)
    b.tell(tb, pb)


def test_a_point_another_worker_publishes_meanwhile_is_asked_again(monkeypatch):
    """The other order of the race: worker B's sampler chooses a point and publishes it, but between its choice and
    its re-read of the storage worker A publishes the same point. B sees it on the re-read and asks again, with A's
    point pending, and its trial gets the second point."""
    from banditkit.bo import BayesOpt

    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(study_name="s", storage=storage)
    a, b = (optuna.load_study(study_name="s", storage=storage, sampler=BanditkitSampler(
        acquisition="ei", seed=0, n_startup_trials=4, warm_up=False, **SMALL)) for _ in range(2))
    a.optimize(objective, n_trials=4)  # (no warm-up thread: only the asks of B's own optimiser are recorded)
    ta = a.ask()  # running; sampled lazily, so nothing published yet
    real_ask, asked = BayesOpt.ask, []

    def racing_ask(self, *args, **kwargs):
        point = real_ask(self, *args, **kwargs)
        if not asked:  # A publishes B's first choice before B re-reads
            storage.set_trial_system_attr(ta._trial_id, "banditkit:proposal", point)
        asked.append(point)
        return point

    monkeypatch.setattr(BayesOpt, "ask", racing_ask)
    tb = b.ask()
    chosen = dict(tb.relative_params)
    assert len(asked) == 2 and asked[1] != asked[0] and chosen == asked[1]


WORKER = textwrap.dedent('''
    import sys
    import numpy as np
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    sys.path.insert(0, sys.argv[3])
    from test_optuna_sampler import SMALL, objective
    from banditkit.integrations.optuna import BanditkitSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(sys.argv[1]))
    study = optuna.load_study(study_name="shared", storage=storage,
                              sampler=BanditkitSampler(seed=0, n_startup_trials=4, **SMALL))  # the same seed in both

    def tagged(trial):
        trial.set_user_attr("worker", sys.argv[2])
        return objective(trial)

    study.optimize(tagged, n_trials=6)
''')


def test_two_worker_processes_share_one_journal_storage(tmp_path):
    """Two processes, each with its own sampler (same seed), on one JournalStorage file: 12 trials, 12 distinct
    completed trials (numbers and points), both workers contributing, BO proposals among them."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = str(tmp_path / "journal.log")
    storage = JournalStorage(JournalFileBackend(path))
    optuna.create_study(study_name="shared", storage=storage, direction="minimize")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join(
        [REPO, TESTS_DIR, os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(script), path, str(w), here], env=env, stderr=subprocess.PIPE)
             for w in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-2000:]
    study = optuna.load_study(study_name="shared", storage=JournalStorage(JournalFileBackend(path)))
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(study.trials) == 12 and len(done) == 12
    assert sorted(t.number for t in done) == list(range(12))
    points = {tuple(sorted(t.params.items())) for t in done}
    assert len(points) == 12, points
    assert {t.user_attrs["worker"] for t in done} == {"0", "1"}


def test_the_warm_up_runs_during_startup_and_changes_no_suggestion():
    """``warm_up=True`` (default) starts one background optimiser of the study's space during the startup trials and
    the first model-based trial waits for it; the trials are exactly those of ``warm_up=False``."""
    studies = {}
    for warm in (True, False):
        sampler = BanditkitSampler(seed=3, n_startup_trials=4, warm_up=warm, **SMALL)
        study = optuna.create_study(sampler=sampler)
        study.optimize(objective, n_trials=7)
        studies[warm] = [t.params for t in study.trials], [t.value for t in study.trials]
        threads = list(sampler._warming.values())
        assert len(threads) == (1 if warm else 0) and not any(t.is_alive() for t in threads)
    assert studies[True] == studies[False]
