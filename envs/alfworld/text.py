"""The ReAct notebook's observation processing for ALFWorld (pure)."""


def opening_text(intro: str) -> str:
    """The notebook: `ob = '\\n'.join(ob[0].split('\\n\\n')[1:])`."""
    return "\n".join(intro.split("\n\n")[1:])


def process_ob(ob: str) -> str:
    """The notebook's `process_ob`."""
    if ob.startswith("You arrive at loc "):
        ob = ob[ob.find(". ") + 2 :]
    return ob
