"""Principals in SQLite: the token hash is a unique column."""

from forkhorse.adapters.sqlite.database import SqliteDatabase, dump
from forkhorse.domain.model import Principal


class SqlitePrincipals(SqliteDatabase):
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        return self._insert(
            "INSERT OR IGNORE INTO principals (id, kind, token_hash, data) VALUES (?, ?, ?, ?)",
            principal.id,
            principal.kind,
            token_hash,
            dump(principal),
        )

    def get_principal(self, principal_id: str) -> Principal | None:
        data = self._one("SELECT data FROM principals WHERE id = ?", principal_id)
        return None if data is None else Principal.model_validate_json(data)

    def list_agents(self) -> list[Principal]:
        rows = self._all("SELECT data FROM principals WHERE kind = 'agent' ORDER BY id")
        return [Principal.model_validate_json(row) for row in rows]

    def find_principal_by_token_hash(self, token_hash: str) -> Principal | None:
        data = self._one("SELECT data FROM principals WHERE token_hash = ?", token_hash)
        principal = None if data is None else Principal.model_validate_json(data)
        return None if principal is None or principal.revoked else principal

    def revoke_principal(self, principal_id: str) -> bool:
        with self._write() as conn:
            row = conn.execute("SELECT data FROM principals WHERE id = ?", (principal_id,))
            found = row.fetchone()
            if found is None:
                return False
            revoked = Principal.model_validate_json(found[0]).model_copy(update={"revoked": True})
            conn.execute(
                "UPDATE principals SET data = ?, token_hash = ? WHERE id = ?",
                (dump(revoked), f"revoked:{principal_id}", principal_id),
            )
            return True
