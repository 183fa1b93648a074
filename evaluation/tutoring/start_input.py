"""What a start of simulated runs is given, checked once: run_start and its price (run_forecast) refuse
the same input with the same words."""

from evaluation.errors import FieldProblem, InvalidInput, NotFound
from evaluation.models import Agent, Persona, Topic
from evaluation.providers import ProviderSpec
from evaluation.runs.selectors import builtin_agent
from evaluation.tutoring import selectors

MAX_TURNS_RANGE = (1, 100)
SEED_RANGE = (0, 2**31 - 1)
"""A start's seed: what a randomly chosen one spans. Each run's seed adds its persona's and repeat's
offset (under 21,000), which keeps it within the session protocol's |seed| < 2**53."""


def start_problems(
    *, max_turns: int, runs_per_persona: int, grade: int | None, provider: str | None, seed: int | None = None
) -> list[FieldProblem]:
    """The numbers and the provider a start names, each out-of-range one with its reason."""
    problems = []
    if seed is not None and not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        problems.append(FieldProblem("seed", f"{seed} is out of range ({SEED_RANGE[0]}-{SEED_RANGE[1]})"))
    if not MAX_TURNS_RANGE[0] <= max_turns <= MAX_TURNS_RANGE[1]:
        problems.append(
            FieldProblem("max_turns", f"{max_turns} is out of range ({MAX_TURNS_RANGE[0]}-{MAX_TURNS_RANGE[1]})")
        )
    if not 1 <= runs_per_persona <= 20:
        problems.append(FieldProblem("runs_per_persona", f"{runs_per_persona} is out of range (1-20)"))
    if grade is not None and not 1 <= grade <= 12:
        problems.append(FieldProblem("grade", f"{grade} is out of range (1-12)"))
    if provider:
        try:
            ProviderSpec.parse(provider)
        except ValueError as exc:
            problems.append(FieldProblem("provider", str(exc)))
    return problems


def gate_problems(*, alpha: float, power: float) -> list[FieldProblem]:
    """The gate's error rates, each out-of-range one with its reason."""
    problems = []
    if not 0 < alpha < 0.5:
        problems.append(FieldProblem("alpha", f"{alpha} is out of range (a false-alarm rate above 0 and below 0.5)"))
    if not 0.5 <= power < 1:
        problems.append(FieldProblem("power", f"{power} is out of range (0.5 or more and below 1)"))
    return problems


def approved_topic(topic_id: str) -> Topic:
    """The topic, which must be approved for runs."""
    topic = selectors.topic_get(topic_id, field="topic_id")
    if not topic.approved:
        raise InvalidInput(
            [
                FieldProblem(
                    "topic_id",
                    f"topic {topic.topic_id!r} is not approved for runs: tick Approved on it in the admin "
                    f'(Topics), or set "approved": true in {topic.source_file or "its file"} and run manage.py '
                    "load_catalog",
                )
            ]
        )
    return topic


def resolve_personas(persona: str) -> list[Persona]:
    """'all', an id ('ace') or a file name ('ace.json'); file paths outside personas/ are refused."""
    value = (persona or "").strip()
    if value == "all":
        return list(Persona.objects.order_by("persona_id"))
    if "/" in value or "\\" in value or value.startswith("."):
        raise InvalidInput(
            [FieldProblem("persona", f"{value!r} must be a persona id or a file name inside personas/, not a path")]
        )
    return [selectors.persona_get(value)]


def start_personas(persona: str | list[str]) -> list[Persona]:
    """Each named persona once, in the order named; NotFound when none is loaded."""
    personas: list[Persona] = []
    for name in [persona] if isinstance(persona, str) else persona:
        personas += [p for p in resolve_personas(name) if p not in personas]
    if not personas:
        raise NotFound("persona: no personas are loaded (run manage.py load_catalog)")
    return personas


def start_agent(agent_id: str | None, *, store: bool = True) -> Agent | None:
    """The agent under test a start names (None: the reference tutor). A built-in tutor (the degraded one) is
    stored on first use when `store` (a run needs its row); a price (store=False) takes it unsaved."""
    if not agent_id:
        return None
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        builtin = builtin_agent(agent_id)
        if builtin is not None:
            if not store:
                return builtin
            stored, _ = Agent.objects.get_or_create(
                pk=builtin.pk,
                defaults={f.name: getattr(builtin, f.name) for f in Agent._meta.concrete_fields if f.name != "id"},
            )
            return stored
        raise NotFound(f"target: no agent {agent_id!r}")
    return agent
