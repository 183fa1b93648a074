"""The data model, one module per domain, re-exported here."""

from evaluation.models.agents import Agent, AgentEvaluationConfig, AgentMessage
from evaluation.models.batches import BatchState, ProviderBatch
from evaluation.models.catalog import Persona, Topic
from evaluation.models.drift import CorrectionLog, DriftRun, Proposition, PropositionScore, PropositionSet
from evaluation.models.judging import (
    Annotation,
    CanarySet,
    Item,
    JudgeConfiguration,
    JudgeScore,
    Rubric,
    RubricDimension,
    RubricVersion,
    Transcript,
)
from evaluation.models.llm import EndpointCredential, LLMConfig
from evaluation.models.prices import ModelPrice
from evaluation.models.queues import Adjudication, LabelQueue, QueueItem, QueueLabel, QueueOrigin
from evaluation.models.ratelimits import RateLimitBudget
from evaluation.models.runs import (
    BaselineGate,
    CompletedRun,
    DimensionScore,
    EvaluationRun,
    FailedRun,
    Problem,
    RunEvent,
    RunMessage,
)
from evaluation.models.sessions import TutoringSession
from evaluation.models.suites import CacheEntry, Case, CaseResult, Suite, SuiteRun

__all__ = [
    "Adjudication",
    "LabelQueue",
    "QueueItem",
    "QueueLabel",
    "QueueOrigin",
    "Transcript",
    "RubricDimension",
    "RubricVersion",
    "Rubric",
    "JudgeScore",
    "JudgeConfiguration",
    "Item",
    "CanarySet",
    "Annotation",
    "Agent",
    "BaselineGate",
    "BatchState",
    "AgentEvaluationConfig",
    "AgentMessage",
    "CacheEntry",
    "Case",
    "CaseResult",
    "CompletedRun",
    "CorrectionLog",
    "DimensionScore",
    "DriftRun",
    "EndpointCredential",
    "EvaluationRun",
    "FailedRun",
    "LLMConfig",
    "ModelPrice",
    "Persona",
    "Problem",
    "ProviderBatch",
    "Proposition",
    "PropositionScore",
    "PropositionSet",
    "RateLimitBudget",
    "RunEvent",
    "RunMessage",
    "Suite",
    "SuiteRun",
    "Topic",
    "TutoringSession",
]
