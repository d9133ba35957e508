"""The approvals inbox of ``tether serve``: a JSON API and server-rendered web pages.

* ``/approvals`` (:mod:`._api`): list the current user's tenant's approval
  requests by approver, role, deadline and age; get one; decide one (approve,
  reject with a reason, edit with arguments validated against the request's
  schema), as the current user and through the same checks as ``tether
  approvals``;
* ``/inbox`` (:mod:`._pages`): the same as HTML pages with plain forms: the
  queue of runs waiting on a person (soonest-expiring, then oldest, first), each
  request in full (the bound arguments and their hash first), forms to approve,
  edit and reject, and a view of expired and orphaned requests.

The user comes from :func:`tether.server._identity.current_user`, never from a
request body. Modules: ``_queue`` (the requests of a tenant and where each
stands), ``_filters``, ``_deciding``, ``_fields`` (the edit form), ``_csrf``,
``_html`` (the pages' text, everything escaped), ``_api``, ``_pages``.
"""

from tether.server.inbox._api import router as api_router
from tether.server.inbox._pages import router as pages_router

__all__ = ["api_router", "pages_router"]
