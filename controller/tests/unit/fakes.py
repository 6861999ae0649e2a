"""A PyMySQL connection for unit tests: every statement is logged, and `answer(sql, args)` says what
rows it returns (a dict cursor's rows)."""


class FakeConnection:
    def __init__(self, answer=lambda sql, args: []):
        self.answer, self.log = answer, []

    def cursor(self):
        return FakeCursor(self)

    def close(self):
        pass


class FakeCursor:
    def __init__(self, conn: FakeConnection):
        self.conn, self.rows = conn, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, args=None):
        self.conn.log.append(sql)
        self.rows = list(self.conn.answer(sql, args))

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows
