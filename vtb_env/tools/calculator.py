"""``calculator``: a safe evaluator of arithmetic (the expression is parsed, never executed as Python).

Operators ``+ - * / %`` and powers ``^`` / ``**``; functions sqrt, sin, cos, tan, log (natural, or
``log(x, base)``), exp, abs; constants pi and e. Exponents and result sizes are bounded so
``9^9^9`` is a clear error instead of a hung rollout.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from typing import Any, Callable, Mapping

from vtb_env.tools.base import Tool, ToolContext, ToolResult
from vtb_env.tools.schemas import CALCULATOR

MAX_EXPRESSION_CHARS = 1000
MAX_INT_BITS = 4096

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "exp": math.exp,
    "abs": abs,
    "log": lambda x, base=math.e: math.log(x, base),
    "ln": math.log,
    "log10": math.log10,
    "log2": math.log2,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculatorError(ValueError):
    """The expression cannot be evaluated; the message says why."""


def evaluate(expression: str) -> int | float:
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/").replace("−", "-")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"cannot parse {expression!r}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; constants: pi, e")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        op = _BINARY.get(type(node.op))
        if op is None:
            raise CalculatorError(f"unsupported operator {type(node.op).__name__}")
        try:
            return _bounded(op(left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = _FUNCTIONS.get(node.func.id)
        if function is None:
            raise CalculatorError(f"unknown function {node.func.id!r}; functions: {', '.join(_FUNCTIONS)}")
        try:
            return _bounded(function(*(_eval(a) for a in node.args)))
        except (ValueError, TypeError, ZeroDivisionError) as exc:
            raise CalculatorError(f"{node.func.id}: {exc}") from None
    raise CalculatorError(f"unsupported syntax: {ast.unparse(node) if hasattr(ast, 'unparse') else node}")


def _power(base: int | float, exponent: int | float) -> int | float:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    try:
        result = base**exponent
    except OverflowError:
        raise CalculatorError("result too large") from None
    except ZeroDivisionError:
        raise CalculatorError("zero cannot be raised to a negative power") from None
    if isinstance(result, complex):
        raise CalculatorError("result is not a real number")
    return _bounded(result)


def _bounded(value: Any) -> int | float:
    if isinstance(value, complex):
        raise CalculatorError("result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
    if isinstance(value, float) and math.isinf(value):
        raise CalculatorError("result too large")
    return value


class Calculator(Tool):
    """``calculator``: evaluates an arithmetic expression safely (no Python ``eval``)."""

    name = "calculator"
    schema = CALCULATOR

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        expression = arguments["expression"]
        try:
            value = evaluate(expression)
        except CalculatorError as exc:
            return ToolResult.failure(f"calculator: {exc}", expression=expression)
        if isinstance(value, float) and math.isnan(value):
            return ToolResult.failure("calculator: result is not a number", expression=expression)
        return ToolResult(text=json.dumps({"expression": expression, "result": value}))
