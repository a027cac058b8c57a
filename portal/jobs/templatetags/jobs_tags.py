"""``{% log_archives %}``: the log table's archives as download links (the log page)."""

from django import template

from portal.jobs import actions

register = template.Library()


@register.inclusion_tag("portal/_log_archives.html")
def log_archives() -> dict:
    return {"archives": actions.log_archives()}
