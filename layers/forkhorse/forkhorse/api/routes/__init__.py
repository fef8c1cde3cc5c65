"""The API's routes, one Powertools `Router` per area, included by `api.app`."""
