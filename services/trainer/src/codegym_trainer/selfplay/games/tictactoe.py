"""Tic-tac-toe: X moves first; cells are numbered 1 to 9, left to right, top to bottom.

Returns: +1 to the winner and -1 to the loser, 0 each for a draw. An unparsable answer, a number off the
board or an occupied cell loses at once (the mover -1, the other +1).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from .base import IllegalMove, find_move

NAME = "tictactoe"
ROLES = ("X", "O")
EMPTY = "."
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))

RULES = (
    "You are playing tic-tac-toe as {role}; X moves first. Three of your marks in a row, a column or a diagonal "
    "win. Cells are numbered 1 to 9, left to right, top to bottom. Naming an occupied cell, a number off the "
    "board, or no cell at all loses the game at once."
)


def winner(board: tuple[str, ...]) -> str | None:
    """The mark with three in a line, if any."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


@dataclass(frozen=True)
class TicTacToe:
    """A tic-tac-toe position: nine cells of ``X``, ``O`` or ``.``, row by row."""

    board: tuple[str, ...] = (EMPTY,) * 9
    forfeited_by: str | None = None

    @classmethod
    def new(cls, rng: random.Random | None = None) -> TicTacToe:
        """The empty board (there is no chance in tic-tac-toe; ``rng`` is taken for a uniform signature)."""
        return cls()

    @classmethod
    def from_rows(cls, *rows: str) -> TicTacToe:
        """A position written as three rows, e.g. ``from_rows("XO.", ".X.", "..O")``."""
        board = tuple("".join(rows))
        if len(board) != 9 or any(c not in "XO." for c in board) or board.count("X") - board.count("O") not in (0, 1):
            raise ValueError(f"not a tic-tac-toe position: {rows!r}")
        return cls(board)

    @property
    def game(self) -> str:
        return NAME

    @property
    def roles(self) -> tuple[str, ...]:
        return ROLES

    @property
    def is_terminal(self) -> bool:
        return self.forfeited_by is not None or winner(self.board) is not None or EMPTY not in self.board

    @property
    def to_move(self) -> str | None:
        if self.is_terminal:
            return None
        return "X" if self.board.count("X") == self.board.count("O") else "O"

    def legal_moves(self) -> tuple[str, ...]:
        if self.is_terminal:
            return ()
        return tuple(str(i + 1) for i, c in enumerate(self.board) if c == EMPTY)

    def parse_move(self, text: str) -> str | None:
        """A cell number: the last one in brackets (``[5]``), else the only number in the text."""
        move = find_move(text, r"\d+")
        return None if move is None else str(int(move))

    def apply(self, move: str) -> TicTacToe:
        legal = self.legal_moves()
        mover = self.to_move
        if move not in legal or mover is None:
            raise IllegalMove(move, legal)
        cell = int(move) - 1
        return TicTacToe((*self.board[:cell], mover, *self.board[cell + 1 :]))

    def forfeit(self) -> TicTacToe:
        if self.to_move is None:
            raise IllegalMove("forfeit", ())
        return TicTacToe(self.board, forfeited_by=self.to_move)

    def returns(self) -> Mapping[str, float]:
        if not self.is_terminal:
            raise ValueError("the game is not over")
        loser = self.forfeited_by
        if loser is None:
            won = winner(self.board)
            loser = None if won is None else ("O" if won == "X" else "X")
        if loser is None:
            return {"X": 0.0, "O": 0.0}
        return {role: -1.0 if role == loser else 1.0 for role in ROLES}

    def render(self) -> str:
        """The board as text, free cells showing their numbers."""
        cells = [c if c != EMPTY else str(i + 1) for i, c in enumerate(self.board)]
        rows = [" " + " | ".join(cells[r : r + 3]) for r in (0, 3, 6)]
        return "\n---+---+---\n".join(rows)

    def observation(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"no role {role!r} in tic-tac-toe")
        head = f"{RULES.format(role=role)}\n\n{self.render()}\n\n"
        if self.is_terminal:
            return head + "The game is over."
        if self.to_move != role:
            return head + f"Waiting for {self.to_move} to move."
        free = ", ".join(self.legal_moves())
        return head + f"Your move. Free cells: {free}. Answer with the cell number in brackets, e.g. [{free[0]}]."
