"""OcrBaselineAgent: a real non-LLM policy (no GPU, no API key), the default agent of command 1.

It acts only through the observation (the dialogue, the images it was shown, the tools offered);
it never sees answers, rubrics, metadata or reference trajectories. Each step:

1. Understand the turn: the latest prompt, read with rules for the kinds of questions the
   benchmark asks (a lookup, a total, a difference, a mean, an order with tip, a share, a speed,
   a route, "which is highest", "how much more than that", "changed since", a weather or
   dividend lookup). A prompt that answers the agent's own clarifying question is merged with
   the question it clarifies; "that" is resolved from the agent's previous answer (its memory
   is the dialogue).
2. Underspecified question (first person, no entry named, several candidate entries): ask a
   clarifying question instead of guessing.
3. Perceive: OCR of the original images (``vtb_env.ocr``), parsed into a table of rows
   (label, value). If the entries the question needs are not all found and the vision tool is
   offered, call ``python_image_processing`` once per turn with concrete code: crops of the
   text-dense regions it located, deskewed by the angle it measured, upscaled, auto-contrasted
   (gamma for dark frames), denoised, in eight orientations (quarter turns,
   mirrored or not). Then read the transformed images the env sends back (the best turn of each region
   a second time in another page mode), vote per row over the readings of each document and answer.
4. Lookups (weather archive, company pages) go through ``historical_weather``, ``web_search`` and
   ``browser_get_page_text``; arithmetic is done by the agent itself (it is exact).
5. Still missing what it needs: say so plainly (an honest failure, graded as such).

It is a solver for the synthetic tasks (``vtb_env.synth``): its question rules are keyed to the
wording in ``vtb_env.synth.templates``, and a test checks each template against them.

Modules: ``reading`` (OCR words -> lines -> rows), ``vision`` (text regions, skew, the vision
tool's code), ``dialogue`` (chat messages -> prompts, images, tool calls, earlier answers),
``questions`` (the turn's question, the rows it names), ``voting`` (several readings of one document
reconciled row by row), ``episode`` (``EpisodeView``, one decision's view
of the dialogue and its images), ``rules`` (one rule per kind of question; each returns an answer, a
tool call or ``Missing``), ``agent`` (``OcrBaselineAgent``: ask, solve, repair or give up).
"""

from vtb_agents.ocr_baseline.agent import OcrBaselineAgent
from vtb_agents.ocr_baseline.questions import named_rows
from vtb_agents.ocr_baseline.reading import parse_reading

__all__ = ["OcrBaselineAgent", "named_rows", "parse_reading"]
