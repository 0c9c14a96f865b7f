"""``AgentSpec``: an agent spec string parsed and validated once.

Grammar (case-insensitive; ``-`` separates the parts, ``_`` or ``-`` inside a name both work)::

    POSTERIOR[-POLICY][-adaptive_noise]      "hilofi-thompson"  "lofi-ucb"  "neural_linear-ts"  "hilofi"
    POLICY                                   "eps_greedy", "greedy": replay_sgd with that point-estimate policy

``POSTERIOR`` is a backend of ``bk.posteriors.REGISTRY`` (the longest prefix of the tokens that names one), the rest
a policy name or alias (``bk.policies``; when absent, the ``policy`` given to :meth:`AgentSpec.parse`, by default
Thompson sampling); a trailing ``adaptive_noise`` learns the Gaussian observation variance online.  ``str(spec)`` is
the canonical text (``"hilofi-thompson"``), which parses back to the same spec; ``spec.label`` is the user's own words
(``"LoFi-UCB"``; ``"hilofi"`` parsed with ``policy="ucb"``: ``"hilofi-ucb"``), the name of its rows in results.
:func:`banditkit.agents.make_agent`, the serving agent and the CLI take either form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from banditkit.policies import rules as _rules
from banditkit.posteriors import noise as _noise
from banditkit.posteriors.registry import normalise

#: policies that need no posterior: a bare ``"eps_greedy"`` / ``"greedy"`` runs them on replay-SGD
POINT_ESTIMATE_POLICIES = ("epsilon_greedy", "greedy")


def _policy_key(token: str) -> str | None:
    key = normalise(token)
    key = _rules.ALIASES.get(key, key)
    return key if key in _rules.POLICIES or key == "thompson_predictive" else None


@dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec (module docstring): ``posterior`` (a registry name), ``policy`` (a policy name) and
    whether the Gaussian observation variance is learned online (``adaptive_noise``).  ``text``: the words it was
    parsed from (not compared: specs of the same agent are equal however they were written); see :attr:`label`."""

    posterior: str
    policy: str = "thompson"
    adaptive_noise: bool = False
    text: str = dataclasses.field(default="", compare=False, repr=False)

    @property
    def label(self) -> str:
        """The name of this agent's rows: the words it was parsed from (with the default policy inserted where they
        named none), else the canonical text ``str(self)``."""
        return self.text or str(self)

    def learning_noise(self) -> AgentSpec:
        """This spec with the observation variance learned online (``adaptive_noise``), its label ending in
        ``-adaptive_noise``; the spec itself when it already learns it."""
        if self.adaptive_noise:
            return self
        return dataclasses.replace(self, adaptive_noise=True, text=f"{self.label}-{_noise.SUFFIX}")

    @classmethod
    def parse(cls, text: str | AgentSpec, *, policy: str | None = None) -> AgentSpec:
        """The spec of ``text``; an :class:`AgentSpec` is returned as it is.  ``policy``: the policy when ``text``
        names a posterior only (default: Thompson sampling); the label then names it too (``"hilofi"`` with
        ``policy="ucb"``: ``"hilofi-ucb"``, ``"hilofi-adaptive_noise"``: ``"hilofi-ucb-adaptive_noise"``).  Unknown
        names raise ``ValueError`` listing the valid ones."""
        if isinstance(text, AgentSpec):
            return text
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"agent spec must be a non-empty string like 'hilofi-thompson', got {text!r}")
        from banditkit import posteriors

        words = text.strip()
        core, learns = _noise.split_suffix(words)
        tokens = [t for t in core.split("-") if t]
        table = posteriors.REGISTRY
        valid = sorted(_rules.POLICIES) + sorted(_rules.ALIASES)
        for cut in range(len(tokens), 0, -1):  # the longest posterior prefix that names a backend
            post = normalise("_".join(tokens[:cut]))
            if post in table:
                rest = tokens[cut:]
                if not rest:
                    if policy is None:
                        return cls(post, "thompson", learns, words)
                    pol = _policy_key(policy)
                    if pol is None:
                        raise ValueError(f"unknown policy {policy!r} for agent spec {text!r}; policies: {valid}")
                    return cls(post, pol, learns, f"{core}-{policy.strip()}" + (f"-{_noise.SUFFIX}" if learns else ""))
                pol = _policy_key("_".join(rest))
                if pol is None:
                    raise ValueError(f"unknown policy {'-'.join(rest)!r} in agent spec {text!r}; policies: {valid}")
                return cls(post, pol, learns, words)
        pol = _policy_key("_".join(tokens))
        if pol in POINT_ESTIMATE_POLICIES:
            return cls("replay_sgd", pol, learns, words)
        raise ValueError(
            f"cannot read agent spec {text!r}: write 'POSTERIOR-POLICY' with POSTERIOR one of {sorted(table)} and "
            f"POLICY one of {sorted(_rules.POLICIES)} (aliases {sorted(_rules.ALIASES)}), e.g. 'hilofi-thompson'"
        )

    def __str__(self) -> str:
        text = f"{self.posterior}-{self.policy}"
        return f"{text}-{_noise.SUFFIX}" if self.adaptive_noise else text
