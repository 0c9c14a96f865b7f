"""BanditAgent's construction-time labels and (issue 72, item 3) its public functions never mutating the agent."""

from banditkit.agents import BanditAgent
from banditkit.models import MLP


def _agent(**kw):
    return BanditAgent(MLP(features=(4,), out=3), "lofi", "ucb", **kw)


def test_spec_and_posterior_name_are_constructor_arguments():
    a = _agent(spec="LoFi-UCB", posterior_name="lofi")
    assert (a.spec, a.posterior_name, a.name) == ("LoFi-UCB", "lofi", "lofi-ucb")
    b = _agent()
    assert b.spec is None and b.posterior_name == "lofi"
    assert _agent(posterior_name="mine").name == "mine-ucb"

