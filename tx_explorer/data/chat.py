"""Chat templates: the Jinja text a model file carries to turn a conversation into the one string it was tuned on.

An instruction-tuned model saw every conversation written one way (SmolLM2: ChatML, ``<|im_start|>user …
<|im_end|>``); the template in its file writes a list of messages that way, ending with the opening of the
assistant's turn. A template is code from a file, so it runs in Jinja's immutable sandbox (no attribute access
to Python internals, no mutation), as transformers renders them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from jinja2 import Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tx_explorer.errors import InputError

ROLES = ("system", "user", "assistant")


def _raise(message: str) -> None:
    raise TemplateError(message)


@cache
def _compile(template: str) -> Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise  # templates call it to refuse a conversation they cannot write
    return env.from_string(template)


def checked(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``messages`` as ``[{"role", "content"}]``, each role one of :data:`ROLES` and each content non-empty text.

    Raises:
        InputError: ``chat_empty`` for no message or an empty one, ``chat_role`` for an unknown role.
    """
    out = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise InputError("chat_role", role=str(role), roles=", ".join(ROLES))
        if not isinstance(content, str) or not content.strip():
            raise InputError("chat_empty")
        out.append({"role": role, "content": content})
    if not out:
        raise InputError("chat_empty")
    return out


def render(
    template: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, **special: Any
) -> str:
    """The conversation written as the template writes it; ``special`` are the names templates use
    (``bos_token``, ``eos_token``).

    Raises:
        InputError: ``chat_template`` when the template does not compile or refuses the conversation.
    """
    msgs = checked(messages)
    try:
        return _compile(template).render(messages=msgs, add_generation_prompt=add_generation_prompt, **special)
    except TemplateError as e:  # SecurityError, a syntax error, or the template's own raise_exception
        raise InputError("chat_template", reason=str(e)) from None
