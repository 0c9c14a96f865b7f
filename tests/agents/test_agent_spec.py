"""AgentSpec: the spec grammar parsed once (API.md §14), its canonical text, and make_agent taking it."""

import gymnasium as gym
import pytest

from banditkit.agents import AgentSpec, make_agent, parse_spec


@pytest.mark.parametrize("text, want", [
    ("hilofi-thompson", ("hilofi", "thompson", False)),
    ("HiLoFi", ("hilofi", "thompson", False)),
    ("neural-linear-ts", ("neural_linear", "thompson", False)),
    ("lofi-ucb-adaptive-noise", ("lofi", "ucb", True)),
    ("eps_greedy", ("replay_sgd", "epsilon_greedy", False)),
    ("linear-pts", ("linear", "thompson_predictive", False)),
])
def test_parse_reads_the_grammar_and_its_text_parses_back(text, want):
    spec = AgentSpec.parse(text)
    assert (spec.posterior, spec.policy, spec.adaptive_noise) == want
    assert AgentSpec.parse(str(spec)) == spec and AgentSpec.parse(spec) is spec
    assert parse_spec(text) == want[:2]


@pytest.mark.parametrize("bad, match", [("", "non-empty"), ("hilofi-foo", "unknown policy 'foo'"),
                                        ("nothing", "cannot read agent spec 'nothing'"), (3, "non-empty")])
def test_parse_names_what_is_wrong(bad, match):
    with pytest.raises(ValueError, match=match):
        AgentSpec.parse(bad)


def test_make_agent_takes_a_spec_or_its_text_alike():
    env = gym.make("banditkit/Shuttle-v0", max_steps=10)
    a = make_agent(AgentSpec("lofi", "ucb"), env)
    b = make_agent("lofi-ucb", env)
    assert (a.posterior.name, a.policy.name, dict(a.posterior.hyper)) == (b.posterior.name, b.policy.name,
                                                                         dict(b.posterior.hyper))
    assert a.spec == "lofi-ucb" and make_agent("LoFi-UCB", env).spec == "LoFi-UCB"  # the label: the user's words
