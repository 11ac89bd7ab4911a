"""Judge prompt templates. The rubric template is the paper's appendix C.3 prompt, verbatim.

Templates are ``str.format`` strings with the fields ``question``, ``golden_answer``,
``rubric_criteria`` and ``model_answer``; ``template_hash`` identifies a template in the
verdict cache, so editing a template never reuses verdicts made with the old text.
"""

from __future__ import annotations

import hashlib

RUBRIC_JUDGE_TEMPLATE = """You are an expert evaluator tasked with judging whether a model's answer meets a specific rubric criterion. You will be provided with:

- a question
- a golden (reference) answer
- a rubric criterion
- the model's answer

Your task is to decide if the model's answer **meets** or **does not meet** the given rubric criterion, referencing the golden answer only as needed.

### Inputs:

**Question:** {question}
**Golden Answer:** {golden_answer}
**Rubric Criterion:** {rubric_criteria}
**Model Answer:** {model_answer}

### Important Notes:

- The model's answer does not need to be correct to meet the criterion if correctness is not required.
*Example:* If the rubric is "The model should show its reasoning process to answer the question," the answer can be incorrect but still meet the rubric if model's reasoning process is present.

- For writing style or presentation rubrics, apply leniency.
*Example:* If the rubric asks for conciseness, answers that are slightly longer than the golden answer but still reasonably length should be considered as meeting the rubric.

- The model's answer may satisfy the rubric implicitly without explicitly mentioning the exact term. This should still be considered as meeting the criterion if model's answer is reasonable and makes sense.
*Example:* If the rubric is "The model should demonstrate understanding of photosynthesis," and the model states "Plants make their own food using sunlight," without explicitly mentioning the term "photosynthesis," it still meets the criterion.

### Output Format:

Return your judgment in the following JSON format:

```
{{
    "explanation": "Brief explanation of your judgment",
    "judge_result": "Met" or "Not Met"
}}
```"""

# KCoverage (seed 000, eq. KCoverage): does one human key step appear in the model's reasoning?
KEY_STEP_JUDGE_TEMPLATE = """You are an expert evaluator. Decide whether a model's reasoning trajectory contains a specific key step of the reference solution. The step may be phrased differently or merged with other steps; it is present if the reasoning performs it or states its result.

### Inputs:

**Question:** {question}
**Golden Answer:** {golden_answer}
**Key Step:** {rubric_criteria}
**Model Reasoning:** {model_answer}

### Output Format:

Return your judgment in the following JSON format:

```
{{
    "explanation": "Brief explanation of your judgment",
    "judge_result": "Met" or "Not Met"
}}
```
Use "Met" if the key step is present, "Not Met" otherwise."""

# Tool effectiveness (seed 000, eq. Effect_tool): is one tool call appropriate for its step?
TOOL_CALL_JUDGE_TEMPLATE = """You are an expert evaluator of tool use. Decide whether a tool invocation is semantically appropriate for the reasoning step that issued it: the right tool, with arguments that serve the step's stated purpose.

### Inputs:

**Question:** {question}
**Golden Answer:** {golden_answer}
**Tool Call:** {rubric_criteria}
**Reasoning Step:** {model_answer}

### Output Format:

Return your judgment in the following JSON format:

```
{{
    "explanation": "Brief explanation of your judgment",
    "judge_result": "Met" or "Not Met"
}}
```
Use "Met" if the call is appropriate for the step, "Not Met" otherwise."""


def template_hash(template: str) -> str:
    """Short stable id of a template's exact text."""
    return hashlib.sha256(template.encode()).hexdigest()[:16]


def render(template: str, *, question: str, golden_answer: str, criterion: str, answer: str) -> str:
    return template.format(
        question=question, golden_answer=golden_answer, rubric_criteria=criterion, model_answer=answer
    )


# The paper's error analysis (appendix B.6): one category per failed answer.
ERROR_TYPE_TEMPLATE = """You are an expert evaluator. A model answered a visual question incorrectly. Classify the main cause of its failure into exactly one category:

- "visual_perception": the model failed to perceive, interpret or extract relevant information from the images (misidentified objects, overlooked salient regions, could not extract key visual content).
- "reasoning": flawed logical inference or problem-solving steps (invalid intermediate steps, contradictions, logically inconsistent conclusions).
- "calculation": incorrect arithmetic or symbolic computation (basic arithmetic mistakes, misapplied formulas, numerical inaccuracies).
- "other": anything else (incomplete responses, refusals, hitting the maximum number of tool calls).

### Inputs:

**Question:** {question}
**Golden Answer:** {golden_answer}
**Rubrics Not Met:** {rubric_criteria}
**Model Answer:** {model_answer}

### Output Format:

Return your judgment in the following JSON format:

```
{{
    "explanation": "Brief explanation of your judgment",
    "error_type": "visual_perception" or "reasoning" or "calculation" or "other"
}}
```"""
