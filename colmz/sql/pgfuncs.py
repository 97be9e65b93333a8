"""PostgreSQL's functions that DuckDB lacks, as Materialize documents them, for translate.

Each is PostgreSQL 15's own computation (``src/backend/utils/adt/formatting.c``,
``timestamp.c``, ``quote.c``, ``arrayfuncs.c``), written over plain Python values so that it
can be read beside the original and tested against PostgreSQL, then registered on every
colmz connection over Arrow (:data:`FUNCTIONS`; :data:`NULL_FUNCTIONS` may give NULL for
values) or written as a DuckDB macro (:data:`MACROS`; :data:`TYPED_MACROS` choose by their
arguments' types when DuckDB binds the query). The rules (:data:`CALLS`, :data:`OPERATORS`) are entries of the table of
transforms (:mod:`colmz.sql.transforms`): each gives the DuckDB text of one node's span.

* ``to_char(timestamp | timestamptz | date, text)``: PostgreSQL's template patterns
  (:func:`to_char`); a date is a ``timestamptz`` there (a date casts to one), read at UTC
  as colmz's sessions are. ``to_char`` of a number or an interval (PostgreSQL has them,
  Materialize does not) is refused by name when the query is bound.
* ``date_bin(stride, source, origin)`` (:func:`date_bin`), ``justify_hours``,
  ``justify_days``, ``justify_interval`` (:func:`justify_interval`), with PostgreSQL's
  errors.
* ``quote_ident``, ``quote_literal``, ``quote_nullable`` (:func:`quote_ident`,
  :func:`quote_literal`): a name is quoted unless it is lower case letters, digits and
  ``_`` not starting with a digit, and not one of PostgreSQL 15's keywords other than the
  unreserved ones (:data:`PG_KEYWORDS`); ``quote_literal`` of a value other than text or an
  integer is refused when the query is bound (PostgreSQL prints it with its type's output).
* ``encode(bytea, format)`` and ``decode(text, format)`` (:func:`encode`, :func:`decode`):
  ``hex``, ``base64``, ``escape``; a string literal given to ``encode`` is bytea's input text;
  ``length`` of a bytea counts its bytes.
* ``array_to_string(a, d, null_text)`` and ``string_to_array(s, d, null_text)``: NULL
  elements printed as ``null_text``, elements equal to it read as NULL.
* Operators on values visibly of a type (a typed literal such as ``INTERVAL '1 hour'``, a
  cast, a call that returns one; a column's type is not known when the text is rewritten:
  ``i / 2`` of an interval column is :mod:`colmz.sql.intervalcols`' once the catalog knows
  it): ``interval / number`` (:func:`interval_div`: fractions of months and days cascade
  down as PostgreSQL's do), ``time - time`` (an interval of microseconds), and a cast of an
  interval to ``time`` (its time of day).
* For :mod:`colmz.sql.intervalcols`: ``interval * number`` (:func:`interval_mul`), the
  parts of an interval and the interval of their sums (``sum(interval)``:
  :data:`INTERVAL_PARTS`, :data:`INTERVAL_OF_SUMS`), ``percentile_cont`` of intervals
  (:func:`interval_percentile_cont`); for :mod:`colmz.sql.arraycols`: ``array_cat``
  (:data:`ARRAY_CAT`).
* PostgreSQL's text of an interval (:func:`interval_text`, :data:`INTERVAL_OUT`), which
  ``::text`` of an interval prints (:data:`colmz.sql.translate.INTERVAL_TEXT`).
* Regular expressions: ``regexp_match`` and ``regexp_matches`` (:func:`regexp_match`,
  :func:`regexp_matches`), ``regexp_split_to_array``
  and ``regexp_split_to_table`` (:func:`regexp_split`: PostgreSQL's degenerate empty matches
  ignored). The pattern is read by Python's ``re`` as PostgreSQL's ARE reads it (its escapes
  ``\\y \\m \\M \\b``, ``$`` only at the end, ``.`` matching a newline) and a match is the
  leftmost and, there, the longest, as PostgreSQL's greedy matching finds it; where the
  two may capture differently -- a repeated capture group, an alternation beside a capture
  group other than of distinct words, a non-greedy quantifier -- or Python cannot read the
  pattern, the call is refused by name when it runs, never answered otherwise.
* Set-returning calls (``regexp_matches``, ``regexp_split_to_table``, ``generate_subscripts``
  of any dimension): in the select list a row per element (``unnest``), in ``FROM`` a
  subquery of those rows whose column is named as PostgreSQL names it
  (:func:`colmz.sql.jsonb.from_rows`; ``WITH ORDINALITY`` refused); inside
  ``CASE``/``coalesce()`` refused.
* Years BC (PostgreSQL and DuckDB keep the same astronomical year: 0 is 1 BC): the text of a
  date, timestamp or timestamptz puts ``BC`` at the end (:data:`DATETIME_TEXT`:
  ``0044-03-15 12:00:00+00 BC``, DuckDB's ``0044-03-15 (BC) 12:00:00+00``); ``extract`` and
  ``date_part`` of the year, decade, century, millennium and ISO year count as PostgreSQL's
  (no year 0: 1 BC is -1; :func:`year_part`); ``date_trunc('decade', ...)`` of a year BC
  starts a year earlier (:data:`TRUNC_DECADE`); ``make_date``, ``make_timestamp`` and
  ``make_timestamptz`` read a negative year as that year BC, year 0 as PostgreSQL's error.
* ``date_part`` is a double precision, seconds and milliseconds with their fraction (a unit
  that is not a literal is refused); ``pg_size_pretty(bigint)`` (:func:`pg_size_pretty`);
  ``sha224`` ... ``sha512`` of bytea are bytea; ``get_byte`` (:func:`get_byte`),
  ``convert_from`` and ``length(bytea, encoding)`` (:func:`convert_from`: UTF8, LATIN1,
  SQL_ASCII), ``bit_length`` of bytea; a string literal given where only bytea is taken is
  bytea's input text.
* ``array_cat`` of arrays of several dimensions checks their sub-arrays' shapes (PostgreSQL's
  error); of arrays of different dimensions it is refused by name (DuckDB's list types differ).
* Materialize lacks ``to_char`` of a number, ``format``, ``width_bucket``, ``array_dims``,
  ``SIMILAR TO``: refused by name (here or by :mod:`colmz.sql.translate`), as is
  ``pg_typeof`` (colmz cannot tell PostgreSQL's exact type of every expression).

Invariant: every function here gives NULL for a NULL argument (PostgreSQL's functions are
strict) and raises PostgreSQL's own message (:data:`ERROR_MESSAGES`, which
:mod:`colmz.sql.run` turns into :class:`~colmz.sql.errors.SQLError`) where PostgreSQL raises.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator

from colmz.sql.build import BYTEA_IN, RESERVED_PREFIX
from colmz.sql.errors import UnsupportedSQL
from colmz.sql.jsonb import from_rows

__all__ = [
    "ARRAY_CAT",
    "ARRAY_TO_STRING_NULL",
    "CALLS",
    "DATETIME_TEXT",
    "ERROR_MESSAGES",
    "FUNCTIONS",
    "INFINITE_PART",
    "INFINITE_REFUSED",
    "INFINITE_UNITS",
    "INTERVAL_DIV",
    "INTERVAL_MUL",
    "INTERVAL_OF_SUMS",
    "INTERVAL_OUT",
    "INTERVAL_PARTS",
    "INTERVAL_PERCENTILE_CONT",
    "MACROS",
    "NULL_FUNCTIONS",
    "OPERATORS",
    "PG_KEYWORDS",
    "TEXT_ELEMENTS",
    "TRUNC_DECADE",
    "TYPED_MACROS",
    "convert_from",
    "date_bin",
    "date_part",
    "decode",
    "encode",
    "get_byte",
    "infinite_part",
    "interval_cmp_key",
    "interval_div",
    "interval_mul",
    "interval_percentile_cont",
    "interval_text",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "pg_size_pretty",
    "quote_ident",
    "quote_literal",
    "regexp_match",
    "regexp_matches",
    "regexp_split",
    "string_to_array_null",
    "to_char",
    "year_part",
]

P = RESERVED_PREFIX
USECS_PER_DAY = 86_400_000_000
_INT32 = (-(2**31), 2**31 - 1)

#: PostgreSQL's messages the functions here raise (a regular expression's alternatives).
ERROR_MESSAGES = (r"stride must be greater than zero|timestamps cannot be binned into intervals containing "
                  r"months or years|origin out of range|interval out of range|division by zero"
                  r"|timestamp out of range|percentile value \S+ is not between 0 and 1"
                  r"|invalid hexadecimal digit: \".*\"|invalid hexadecimal data: odd number "
                  r"of digits|invalid symbol \".*\" found while decoding base64 sequence|invalid base64 end sequence"
                  r"|unexpected \"=\" while decoding base64 sequence|invalid input syntax for type bytea"
                  r"|unrecognized encoding: \".*\"|regexp_\w+\(\) does not support the \"global\" option"
                  r"|invalid regular expression option: \".*\"|invalid regular expression: [\w ()\[\]]+"
                  r"|index -?\d+ out of valid range, 0\.\.-?\d+|invalid source encoding name \".*\""
                  r"|invalid byte sequence for encoding \"\w+\": .*|cannot concatenate incompatible arrays")


# ----------------------------------------------------------------------------- calendar

def civil(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian ``(year, month, day)`` of ``days`` after 1970-01-01 (year 0
    is 1 BC, as PostgreSQL's ``tm_year``).

    >>> civil(0), civil(-1), civil(19723)
    ((1970, 1, 1), (1969, 12, 31), (2024, 1, 1))
    """
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


def days_from_civil(y: int, m: int, d: int) -> int:
    """The inverse of :func:`civil`.

    >>> days_from_civil(2024, 1, 1)
    19723
    """
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _iso_week(days: int) -> tuple[int, int]:
    # (ISO year, ISO week) of a day: the week's Thursday decides its year
    isodow = (days + 3) % 7 + 1  # 1970-01-01 was a Thursday (4)
    thursday = days - isodow + 4
    y = civil(thursday)[0]
    return y, (thursday - days_from_civil(y, 1, 1)) // 7 + 1


# ----------------------------------------------------------------------------- to_char

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII")

#: formatting.c's DCH keywords, longest first where one is the other's prefix (the order
#: its index search tries them in); matched case-sensitively.
_KEYWORDS = (
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "Day", "Dy", "D",
    "FF1", "FF2", "FF3", "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY",
    "IYY", "IY", "I", "J", "MI", "MM", "MONTH", "MON", "MS", "Month", "Mon", "OF", "P.M.", "PM", "Q",
    "RM", "SSSSS", "SSSS", "SS", "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y",
    "a.d.", "a.m.", "ad", "am", "b.c.", "bc", "cc", "day", "ddd", "dd", "dy", "d", "ff1", "ff2", "ff3",
    "ff4", "ff5", "ff6", "fx", "hh24", "hh12", "hh", "iddd", "id", "iw", "iyyy", "iyy", "iy", "i", "j",
    "mi", "mm", "month", "mon", "ms", "of", "p.m.", "pm", "q", "rm", "sssss", "ssss", "ss", "tzh",
    "tzm", "tz", "us", "ww", "w", "y,yyy", "yyyy", "yyy", "yy", "y",
)
_BY_FIRST: dict[str, tuple[str, ...]] = {}
for _k in _KEYWORDS:
    _BY_FIRST[_k[0]] = (*_BY_FIRST.get(_k[0], ()), _k)


def _template(fmt: str) -> list[tuple[str, str, bool, bool, str]]:
    # formatting.c's parse_format for DCH: nodes (kind, text, fill mode, translation mode,
    # ordinal suffix), kind "key" for a keyword and "char" for a character copied.
    nodes, i, n = [], 0, len(fmt)
    while i < n:
        fm = tm = False
        if fmt.startswith(("FM", "fm"), i):
            fm, i = True, i + 2
        elif fmt.startswith(("TM", "tm"), i):
            tm, i = True, i + 2
        if i >= n:
            break
        key = next((k for k in _BY_FIRST.get(fmt[i], ()) if fmt.startswith(k, i)), None)
        if key is not None:
            i += len(key)
            th = ""
            if fmt.startswith(("TH", "th", "SP"), i):
                th, i = fmt[i : i + 2], i + 2
            nodes.append(("key", key, fm, tm, th))
        elif fmt[i] == '"':  # a quoted literal; a backslash quotes the next character
            i += 1
            while i < n:
                if fmt[i] == '"':
                    i += 1
                    break
                if fmt[i] == "\\" and i + 1 < n:
                    i += 1
                nodes.append(("char", fmt[i], False, False, ""))
                i += 1
        else:
            if fmt[i] == "\\" and i + 1 < n and fmt[i + 1] == '"':
                i += 1
            nodes.append(("char", fmt[i], False, False, ""))
            i += 1
    return nodes


def _ordinal(s: str, th: str) -> str:
    # formatting.c's str_numth: the suffix of the number's last digit (teens take th)
    last = "0" if len(s) > 1 and s[-2] == "1" else s[-1]
    suffix = {"1": "st", "2": "nd", "3": "rd"}.get(last, "th")
    return s + (suffix.upper() if th == "TH" else suffix)


def _padded(v: int, width: int, fm: bool) -> str:
    # C's "%0*d": zero-padded to width (the sign counting), none in fill mode
    return str(v) if fm else f"{v:0{width}d}"


def _cased(word: str, key: str) -> str:
    # DAY / Day / day: the case of the keyword as written
    return word.upper() if key.isupper() else word.lower() if key.islower() else word


#: The Julian day number of 1970-01-01 (to_char's ``J``: days since 4714-11-24 BC).
_JULIAN_DAY_OF_EPOCH = 2440588


def to_char(micros: int, fmt: str, zone: str | None = None) -> str:
    """PostgreSQL's ``to_char(timestamp, fmt)`` of the timestamp ``micros`` microseconds after
    1970-01-01 00:00; ``zone`` the time zone's abbreviation of a ``timestamptz`` (``TZ``
    prints it; ``None`` for a timestamp, whose ``TZ`` prints nothing). The offset is 0
    (colmz's sessions are at UTC).

    >>> to_char(1709301906_000000, 'YYYY-MM-DD HH24:MI:SS')
    '2024-03-01 14:05:06'
    >>> to_char(1709301906_000000, 'FMDay, FMDDth "of" FMMonth YYYY HH12 AM')
    'Friday, 1st of March 2024 02 PM'
    >>> to_char(1709301906_000000, 'Dy Mon IYYY-IW Q WW DDD J')
    'Fri Mar 2024-09 1 09 061 2460371'
    """
    days, us = divmod(micros, USECS_PER_DAY)
    y, mo, d = civil(days)
    hour, rest = divmod(us, 3_600_000_000)
    minute, rest = divmod(rest, 60_000_000)
    sec, fsec = divmod(rest, 1_000_000)
    wday = (days + 4) % 7
    yday = days - days_from_civil(y, 1, 1) + 1
    out = []
    for kind, key, fm, tm, th in _template(fmt):
        if kind == "char":
            out.append(key)
            continue
        up = key.upper()
        s = None  # a number's text, to which TH/th applies
        if up in ("AM", "PM", "A.M.", "P.M."):
            word = ("P" if hour >= 12 else "A") + ("." if "." in key else "") + "M" + ("." if "." in key else "")
            out.append(word if key[0].isupper() else word.lower())
        elif up in ("AD", "BC", "A.D.", "B.C."):
            word = ("A" if y > 0 else "B") + ("." if "." in key else "") + ("D" if y > 0 else "C") \
                + ("." if "." in key else "")
            out.append(word if key[0].isupper() else word.lower())
        elif up in ("HH", "HH12"):
            s = _padded(hour % 12 or 12, 2, fm)
        elif up == "HH24":
            s = _padded(hour, 2, fm)
        elif up == "MI":
            s = _padded(minute, 2, fm)
        elif up == "SS":
            s = _padded(sec, 2, fm)
        elif up == "MS":
            s = f"{fsec // 1000:03d}"
        elif up == "US":
            s = f"{fsec:06d}"
        elif up.startswith("FF"):
            k = int(up[2])
            s = f"{fsec // 10 ** (6 - k):0{k}d}"
        elif up in ("SSSS", "SSSSS"):
            s = str(hour * 3600 + minute * 60 + sec)
        elif up == "TZ":
            if zone is not None:
                out.append(zone.lower() if key == "tz" else zone)
        elif up == "TZH":
            out.append("+00")
        elif up == "TZM":
            out.append("00")
        elif up == "OF":
            out.append("+0" if fm else "+00")
        elif up in ("MONTH", "DAY"):
            word = _cased((_MONTHS[mo - 1] if up == "MONTH" else _DAYS[wday]), key)
            out.append(word if fm or tm else f"{word:<9}")
        elif up in ("MON", "DY"):
            out.append(_cased((_MONTHS[mo - 1] if up == "MON" else _DAYS[wday])[:3], key))
        elif up == "MM":
            s = _padded(mo, 2, fm)
        elif up == "DDD":
            s = _padded(yday, 3, fm)
        elif up == "IDDD":
            iy, iw = _iso_week(days)
            s = _padded((iw - 1) * 7 + (days + 3) % 7 + 1, 3, fm)
        elif up == "DD":
            s = _padded(d, 2, fm)
        elif up == "D":
            s = str(wday + 1)
        elif up == "ID":
            s = str(wday or 7)
        elif up == "WW":
            s = _padded((yday - 1) // 7 + 1, 2, fm)
        elif up == "IW":
            s = _padded(_iso_week(days)[1], 2, fm)
        elif up == "Q":
            s = str((mo - 1) // 3 + 1)
        elif up == "CC":
            c = (y - 1) // 100 + 1 if y > 0 else -((-y) // 100) - 1
            s = _padded(c, 2 if c >= 0 else 3, fm) if -99 <= c <= 99 else str(c)
        elif up == "Y,YYY":
            ay = y if y > 0 else 1 - y
            s = f"{ay // 1000},{ay % 1000:03d}"
        elif up in ("YYYY", "YYY", "YY", "Y", "IYYY", "IYY", "IY", "I"):
            yy = _iso_week(days)[0] if up[0] == "I" else y
            ay = yy if yy > 0 else 1 - yy
            digits = len(up)
            if digits == 4:
                s = _padded(ay, 4, fm)
            else:
                s = _padded(ay % 10**digits, digits, fm) if digits > 1 else str(ay % 10)
        elif up == "RM":
            r = _ROMAN[mo - 1]
            r = r if key == "RM" else r.lower()
            out.append(r if fm else f"{r:<4}")
        elif up == "W":
            s = str((d - 1) // 7 + 1)
        elif up == "J":
            s = str(days + _JULIAN_DAY_OF_EPOCH)
        # FX: no output
        if s is not None:
            out.append(_ordinal(s, th) if th in ("TH", "th") else s)
    return "".join(out)


# ----------------------------------------------------------------------------- intervals

def _int32(v: int) -> int:
    if not _INT32[0] <= v <= _INT32[1]:
        raise ValueError("interval out of range")
    return v


def _trunc_div(a: int, b: int) -> tuple[int, int]:
    # C's integer division (toward zero) and its remainder
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)
    return q, a - q * b


def justify_hours(months: int, days: int, micros: int) -> tuple[int, int, int]:
    """PostgreSQL's ``justify_hours``: whole days of the time part moved to the days.

    >>> justify_hours(0, 0, 27 * 3_600_000_000)
    (0, 1, 10800000000)
    >>> justify_hours(0, 1, -3_600_000_000)
    (0, 0, 82800000000)
    """
    whole, micros = _trunc_div(micros, USECS_PER_DAY)
    days = _int32(days + whole)
    if days > 0 and micros < 0:
        micros, days = micros + USECS_PER_DAY, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - USECS_PER_DAY, days + 1
    return months, days, micros


def justify_days(months: int, days: int, micros: int) -> tuple[int, int, int]:
    """PostgreSQL's ``justify_days``: every 30 days a month.

    >>> justify_days(0, 35, 0), justify_days(1, -1, 0)
    ((1, 5, 0), (0, 29, 0))
    """
    whole, days = _trunc_div(days, 30)
    months = _int32(months + whole)
    if months > 0 and days < 0:
        days, months = days + 30, months - 1
    elif months < 0 and days > 0:
        days, months = days - 30, months + 1
    return months, days, micros


def justify_interval(months: int, days: int, micros: int) -> tuple[int, int, int]:
    """PostgreSQL's ``justify_interval``: days from the time part, months from the days, the
    signs of the three parts made one.

    >>> justify_interval(1, -1, -3_600_000_000)
    (0, 28, 82800000000)
    """
    if (days > 0 and micros > 0) or (days < 0 and micros < 0):  # (pre-justified: no overflow)
        whole, days = _trunc_div(days, 30)
        months = _int32(months + whole)
    whole, micros = _trunc_div(micros, USECS_PER_DAY)
    days = _int32(days + whole)
    whole, days = _trunc_div(days, 30)
    months = _int32(months + whole)
    if months > 0 and (days < 0 or (days == 0 and micros < 0)):
        days, months = days + 30, months - 1
    elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
        days, months = days - 30, months + 1
    if days > 0 and micros < 0:
        micros, days = micros + USECS_PER_DAY, days - 1
    elif days < 0 and micros > 0:
        micros, days = micros - USECS_PER_DAY, days + 1
    return months, days, micros


def interval_text(months: int, days: int, micros: int) -> str:
    """PostgreSQL's text of an interval (``IntervalStyle`` postgres): years, months and days
    as words, a field after a negative one signed ``+`` when positive, the time as
    ``[-]hh:mm:ss[.ffffff]``.

    >>> interval_text(-1, 10, 3_600_000_000), interval_text(14, -1, 0), interval_text(0, 0, 0)
    ('-1 mons +10 days 01:00:00', '1 year 2 mons -1 days', '00:00:00')
    """
    out, before = [], False
    year, month = _trunc_div(months, 12)
    for value, unit in ((year, "year"), (month, "mon"), (days, "day")):
        if value:
            out.append(f"{'+' if before and value > 0 else ''}{value} {unit}{'' if value == 1 else 's'}")
            before = value < 0
    if not out or micros:
        sign = "-" if micros < 0 else "+" if before else ""
        hours, rest = divmod(abs(micros), 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        seconds, fraction = divmod(rest, 1_000_000)
        time = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
        out.append(time + (f".{fraction:06d}".rstrip("0") if fraction else ""))
    return " ".join(out)


def _tsround(x: float) -> float:
    return round(x * 1e6) / 1e6  # (round: C's rint, ties to even)


def interval_div(months: int, days: int, micros: int, factor: float) -> tuple[int, int, int]:
    """PostgreSQL 15's ``interval / float8``: each part divided, the fractions of months (as
    30 days) and of days (as 24 hours) cascaded down, the microseconds rounded.

    >>> interval_div(1, 0, 0, 2.0)
    (0, 15, 0)
    >>> interval_div(0, 1, 3_600_000_000, 2.0)
    (0, 0, 45000000000)
    """
    import math

    if factor == 0:
        raise ValueError("division by zero")
    if math.isnan(factor):
        raise ValueError("interval out of range")
    m = _int32(int(months / factor)) if math.isfinite(months / factor) else _int32(2**31)
    dd = _int32(int(days / factor)) if math.isfinite(days / factor) else _int32(2**31)
    month_days = _tsround((months / factor - m) * 30)
    sec = _tsround((days / factor - dd + month_days - int(month_days)) * 86400)
    if abs(sec) >= 86400:
        dd += int(sec / 86400)
        sec -= int(sec / 86400) * 86400
    dd = _int32(dd + int(month_days))
    t = round(micros / factor + sec * 1e6)
    if not -(2**63) <= t < 2**63:
        raise ValueError("interval out of range")
    return m, dd, t


def interval_mul(months: int, days: int, micros: int, factor: float) -> tuple[int, int, int]:
    """PostgreSQL 15's ``interval * float8`` (``interval_mul``): each part multiplied, months
    and days truncated (past an int32: "interval out of range"), the fractions of months (as
    30 days) and of days (as 24 hours) cascaded down, the microseconds rounded.

    >>> interval_mul(1, 0, 0, 0.5), interval_mul(0, 3, 0, 1.5)
    ((0, 15, 0), (0, 4, 43200000000))
    >>> interval_mul(0, 40, -3_600_000_000, 0.3)
    (0, 12, -1080000000)
    """
    import math

    result = []
    for part in (months, days):
        x = part * factor
        if math.isnan(x) or not _INT32[0] <= x <= _INT32[1]:
            raise ValueError("interval out of range")
        result.append(int(x))
    m, dd = result
    month_days = _tsround((months * factor - m) * 30)
    sec = _tsround((days * factor - dd + month_days - int(month_days)) * 86400)
    if abs(sec) >= 86400:
        dd += int(sec / 86400)
        sec -= int(sec / 86400) * 86400
    dd += int(month_days)
    t = micros * factor + sec * 1e6
    if math.isnan(t) or not -(2.0**63) <= t < 2.0**63:
        raise ValueError("interval out of range")
    return m, dd, round(t)


def _interval_add(a: tuple[int, int, int], b: tuple[int, int, int], sign: int = 1) -> tuple[int, int, int]:
    # PostgreSQL's interval_pl (sign 1) and interval_mi (sign -1): part by part, overflow raises
    m, d, t = (x + sign * y for x, y in zip(a, b))
    if not -(2**63) <= t < 2**63:
        raise ValueError("interval out of range")
    return _int32(m), _int32(d), t


def interval_cmp_key(months: int, days: int, micros: int) -> int:
    """PostgreSQL's order of intervals (``interval_cmp_value``): a month is 30 days, a day
    24 hours, so ``'1 mon'``, ``'30 days'`` and ``'720:00:00'`` are equal.

    >>> interval_cmp_key(1, 0, 0) == interval_cmp_key(0, 30, 0) == interval_cmp_key(0, 0, 720 * 3_600_000_000)
    True
    """
    return (months * 30 + days) * USECS_PER_DAY + micros


def interval_percentile_cont(values: list, fraction: float, descending: bool = False) -> tuple[int, int, int] | None:
    """PostgreSQL 15's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY x)`` of intervals
    ``values`` (``(months, days, micros)`` or None, which are left out): the values in
    PostgreSQL's order (:func:`interval_cmp_key`; ``descending``: ``ORDER BY x DESC``), the rows at the floor and ceiling of
    ``fraction * (n - 1)`` interpolated by ``interval_lerp`` (``lo + (hi - lo) * p``, with
    :func:`interval_mul`); None for no rows.

    >>> interval_percentile_cont([(0, 40, -3_600_000_000), (1, 2, 10_800_000_000), (12, 0, 500_000)], 0.3)
    (1, 6, 71280000000)
    >>> interval_percentile_cont([None], 2.0) is None
    True
    """
    import math

    rows = sorted((v for v in values if v is not None), key=lambda v: interval_cmp_key(*v), reverse=descending)
    if not rows:
        return None
    if math.isnan(fraction) or not 0 <= fraction <= 1:
        raise ValueError(f"percentile value {fraction:g} is not between 0 and 1")
    at = fraction * (len(rows) - 1)
    first, second = math.floor(at), math.ceil(at)
    if second == first:
        return tuple(rows[first])
    lo, hi = tuple(rows[first]), tuple(rows[second])
    return _interval_add(interval_mul(*_interval_add(hi, lo, -1), at - first), lo)


def date_bin(stride: tuple[int, int, int], source: int, origin: int) -> int:
    """PostgreSQL 15's ``date_bin(stride, source, origin)`` over microseconds: the start of
    the bin of ``stride`` (no months) holding ``source``, bins aligned at ``origin``.

    >>> date_bin((0, 0, 900_000_000), 1_000_000_000, 0)
    900000000
    >>> date_bin((0, 0, 900_000_000), -1, 0), date_bin((0, 0, 900_000_000), -900_000_000, 0)
    (-900000000, -900000000)
    """
    months, days, micros = stride
    if months:
        raise ValueError("timestamps cannot be binned into intervals containing months or years")
    step = days * USECS_PER_DAY + micros
    if step <= 0:
        raise ValueError("stride must be greater than zero")
    diff = source - origin
    return origin + diff - diff % step  # (Python's % floors: the bin's start, also before origin)


# ----------------------------------------------------------------------------- quoting

#: PostgreSQL 15's keywords other than the unreserved ones (``kwlist.h``): quote_ident
#: quotes them.
PG_KEYWORDS = frozenset("""
all analyse analyze and any array as asc asymmetric authorization between bigint binary bit boolean
both case cast char character check coalesce collate collation column concurrently constraint
create cross current_catalog current_date current_role current_schema current_time
current_timestamp current_user dec decimal default deferrable desc distinct do else end except
exists extract false fetch float for foreign freeze from full grant greatest group grouping having
ilike in initially inner inout int integer intersect interval into is isnull join lateral leading
least left like limit localtime localtimestamp national natural nchar none normalize not notnull
null nullif numeric offset on only or order out outer overlaps overlay placing position precision
primary real references returning right row select session_user setof similar smallint some
substring symmetric table tablesample then time timestamp to trailing treat trim true union unique
user using values varchar variadic verbose when where window with xmlattributes xmlconcat
xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable
""".split())  # noqa: SIM905 - kwlist.h's words as a paragraph
_SAFE_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def quote_ident(name: str) -> str:
    """PostgreSQL's ``quote_ident``: ``name`` in double quotes (inner ones doubled) unless it
    reads as itself unquoted.

    >>> quote_ident('abc'), quote_ident('a b'), quote_ident('Abc'), quote_ident('select')
    ('abc', '"a b"', '"Abc"', '"select"')
    """
    if _SAFE_NAME.fullmatch(name) and name not in PG_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """PostgreSQL's ``quote_literal``: a string literal, ``E''`` when it holds a backslash
    (doubled, as every quote).

    >>> quote_literal("it's"), quote_literal('a\\\\b')
    ("'it''s'", "E'a\\\\\\\\b'")
    """
    body = text.replace("'", "''").replace("\\", "\\\\")
    return ("E'" if "\\" in text else "'") + body + "'"


# ----------------------------------------------------------------------------- encode / decode

_WHITESPACE = " \n\t\r"


def _format(fmt: str) -> str:
    f = fmt.lower()
    if f not in ("hex", "base64", "escape"):
        raise ValueError(f'unrecognized encoding: "{fmt}"')
    return f


def encode(data: bytes, fmt: str) -> str:
    r"""PostgreSQL's ``encode(bytea, format)``: ``hex`` (lower case), ``base64`` (a line break
    after every 76 characters) or ``escape`` (a zero byte, a high byte as ``\\ooo``, a
    backslash doubled).

    >>> encode(b'\x00a\\\xff', 'hex'), encode(b'\x00a\\\xff', 'escape'), encode(b'ab', 'BASE64')
    ('00615cff', '\\000a\\\\\\377', 'YWI=')
    """
    import base64

    f = _format(fmt)
    if f == "hex":
        return data.hex()
    if f == "base64":
        text = base64.b64encode(data).decode()
        return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    return "".join(f"\\{b:03o}" if b == 0 or b >= 0x80 else "\\\\" if b == 0x5C else chr(b) for b in data)


def decode(text: str, fmt: str) -> bytes:
    r"""PostgreSQL's ``decode(text, format)``, the inverse of :func:`encode` (whitespace between
    hex digit pairs and in base64 skipped), with PostgreSQL's errors.

    >>> decode('61 62', 'hex'), decode('YW\nI=', 'base64'), decode('a\\000\\\\', 'escape')
    (b'ab', b'ab', b'a\x00\\')
    """
    f = _format(fmt)
    data = text.encode()
    if f == "hex":
        out, i = bytearray(), 0
        while i < len(text):
            if text[i] in _WHITESPACE:
                i += 1
                continue
            pair = text[i : i + 2]
            for ch in pair:
                if ch not in "0123456789abcdefABCDEF":
                    raise ValueError(f'invalid hexadecimal digit: "{ch}"')
            if len(pair) < 2:
                raise ValueError("invalid hexadecimal data: odd number of digits")
            out.append(int(pair, 16))
            i += 2
        return bytes(out)
    if f == "base64":
        return _base64_decode(text)
    out, i = bytearray(), 0
    while i < len(data):
        if data[i] != 0x5C:
            out.append(data[i])
            i += 1
        elif data[i + 1 : i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif re.fullmatch(rb"[0-3][0-7][0-7]", data[i + 1 : i + 4]):
            out.append(int(data[i + 1 : i + 4], 8))
            i += 4
        else:
            raise ValueError("invalid input syntax for type bytea")
    return bytes(out)


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _base64_decode(text: str) -> bytes:
    # encode.c's pg_base64_decode: whitespace skipped; "=" after two or three symbols of a
    # group ends the data's length
    out, acc, pos, end = bytearray(), 0, 0, 0
    for ch in text:
        if ch in _WHITESPACE:
            continue
        if ch == "=":
            if end == 0:
                if pos == 2:
                    end = 1
                elif pos == 3:
                    end = 2
                else:
                    raise ValueError("unexpected \"=\" while decoding base64 sequence")
            b = 0
        else:  # (a symbol after the end is read: the groups after it keep the end's length)
            b = _B64.find(ch)
            if b < 0:
                raise ValueError(f'invalid symbol "{ch}" found while decoding base64 sequence')
        acc = (acc << 6) + b
        pos += 1
        if pos == 4:
            out.append((acc >> 16) & 255)
            if end == 0 or end > 1:
                out.append((acc >> 8) & 255)
            if end == 0 or end > 2:
                out.append(acc & 255)
            acc, pos = 0, 0
    if pos != 0:
        raise ValueError("invalid base64 end sequence")
    return bytes(out)


# ----------------------------------------------------------------------------- bytes and encodings

def get_byte(data: bytes, n: int) -> int:
    r"""PostgreSQL's ``get_byte(bytea, n)``: the byte at offset ``n`` (from 0), its error
    outside the data.

    >>> get_byte(b'\x01\x02\x03', 1)
    2
    """
    if not 0 <= n < len(data):
        raise ValueError(f"index {n} out of valid range, 0..{len(data) - 1}")
    return data[n]


#: The source encodings colmz converts from (PostgreSQL's names as pg_char_to_encoding
#: compares them: lower case, only letters and digits), as Python names them.
_ENCODINGS = {"utf8": ("UTF8", "utf-8"), "unicode": ("UTF8", "utf-8"), "latin1": ("LATIN1", "latin-1"),
              "iso88591": ("LATIN1", "latin-1"), "sqlascii": ("SQL_ASCII", "ascii")}
#: PostgreSQL 15's other encoding names (encnames.c, cleaned as above): known, not converted here.
_OTHER_ENCODINGS = frozenset("""
abc alt big5 cp1250 cp1251 cp1252 cp1253 cp1254 cp1255 cp1256 cp1257 cp1258 cp437 cp850 cp852 cp855 cp857 cp858
cp860 cp861 cp862 cp863 cp864 cp865 cp866 cp869 cp874 cp932 cp936 cp949 cp950 eucchs eucjis2004 eucjp euccn euckr
euctw gb18030 gbk iso88592 iso88593 iso88594 iso88595 iso88596 iso88597 iso88598 iso88599 iso885910 iso885913
iso885914 iso885915 iso885916 johab koi8 koi8r koi8u latin10 latin2 latin3 latin4 latin5 latin6 latin7 latin8 latin9
mskanji muleinternal shiftjis shiftjis2004 sjis tcvn tcvn5712 uhc vscii win win1250 win1251 win1252 win1253 win1254
win1255 win1256 win1257 win1258 win866 win874 win932 win936 win949 win950 windows1250 windows1251 windows1252
windows1253 windows1254 windows1255 windows1256 windows1257 windows1258 windows866 windows874 windows932 windows936
windows949 windows950
""".split())  # noqa: SIM905 - encnames.c's names as a paragraph


def _utf8_length(b: int) -> int:
    # pg_utf_mblen: a character's length from its first byte
    return 1 if b < 0x80 else 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1


def convert_from(data: bytes, encoding: str) -> str:
    r"""PostgreSQL's ``convert_from(bytea, encoding)`` into UTF8 text, from UTF8, LATIN1 or
    SQL_ASCII; another of PostgreSQL's encodings is refused by name, a name it does not
    know is its error, and so is a byte sequence the encoding does not hold (or a zero).

    >>> convert_from(b'a\xc3\xa9', 'UTF-8'), convert_from(b'\xe9', 'latin1')
    ('aé', 'é')
    """
    key = re.sub(r"[^a-z0-9]", "", encoding.lower())
    if key not in _ENCODINGS:
        if key in _OTHER_ENCODINGS:
            raise ValueError(f"convert_from() from the encoding {encoding!r} is not supported by colmz (only "
                             "UTF8, LATIN1 and SQL_ASCII)")
        raise ValueError(f'invalid source encoding name "{encoding}"')
    name, codec = _ENCODINGS[key]
    # the source is checked first (a zero byte is in none), then SQL_ASCII's bytes as UTF8
    bad, shown_as = data.find(0), name
    if bad < 0:
        try:
            return data.decode("utf-8" if name == "SQL_ASCII" else codec)
        except UnicodeDecodeError as e:
            bad, shown_as = e.start, "UTF8"
    # wchar.c's report_invalid_encoding: the bytes of the character from the bad one
    width = 1 if data[bad] == 0 else min(_utf8_length(data[bad]), len(data) - bad, 8)
    shown = " ".join(f"0x{b:02x}" for b in data[bad : bad + width])
    raise ValueError(f'invalid byte sequence for encoding "{shown_as}": {shown}')


# ----------------------------------------------------------------------------- regular expressions

#: PostgreSQL's regular expression flags colmz reads (``parse_re_flags``): ``c`` and ``i``
#: (case), ``s`` (the default: not newline-sensitive), ``g`` where the function takes it.
_RE_FLAGS = frozenset("cigs")
#: PostgreSQL's flags Python's ``re`` cannot stand for (newline-sensitive modes, basic and
#: literal syntax, expanded syntax): refused by name.
_RE_OTHER_FLAGS = frozenset("bemnpqtwx")
#: ARE escapes (outside a bracket expression) as Python writes them: ``\b`` is a backspace
#: in PostgreSQL (Python's word boundary is ``\y``), ``\m``/``\M`` a word's start and end,
#: ``\B`` a backslash; escapes both read alike are copied.
_RE_ESCAPES = {"b": r"\x08", "y": r"\b", "Y": r"\B", "m": r"\b(?=\w)", "M": r"\b(?<=\w)", "B": r"\\",
               "e": r"\x1b", "Z": r"\Z", "A": r"\A"}
_RE_SAME = frozenset("dDsSwWntrfva0123456789")


def _re_refused(fn: str, what: str) -> ValueError:
    return ValueError(f"{fn}() with {what} is not supported by colmz (Python's regular expressions stand "
                      "for PostgreSQL's)")


def _re_text(pattern: str, fn: str) -> str:
    # The Python text of an ARE pattern: escapes as _RE_ESCAPES, ``$`` the end of the text
    # (Python's also matches before a final newline), bracket expressions copied; what
    # reads otherwise in Python is refused (a POSIX class, a lazy quantifier, whose
    # greediness rules are PostgreSQL's own, a Python-only group).
    out, i, n = [], 0, len(pattern)
    # the open groups, the whole pattern first: [where its text starts in out, capturing,
    # where its current alternative starts in the pattern, its earlier alternatives]
    groups: list[list] = [[0, False, 0, []]]
    ambiguous = captures = False
    while i < n:
        ch = pattern[i]
        if ch == "(":
            capturing = not pattern.startswith("?", i + 1)
            captures |= capturing
            groups.append([len(out) + 1, capturing, i + 1 + 2 * (not capturing), []])
        elif ch == "|":
            groups[-1][3].append(pattern[groups[-1][2] : i])
            groups[-1][2] = i + 1
        elif ch == ")" and len(groups) > 1:
            at, capturing, alt, alts = groups.pop()
            ambiguous |= _ambiguous([*alts, pattern[alt:i]])
            after = pattern[i + 1 : i + 2]
            if capturing and (after in ("*", "+", "{") or after == "?" and _empty_match("".join(out[at:]))):
                # which iteration a repeated group reports differs (PostgreSQL's (a+)+ of 'aa'
                # captures 'a', Python's 'aa'; (b*)* of 'b': 'b' and '')
                raise _re_refused(fn, "a repeated capture group")
        if ch == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in _RE_ESCAPES:
                out.append(_RE_ESCAPES[e])
            elif e in _RE_SAME or not e.isalnum():
                out.append(pattern[i : i + 2])
            else:
                raise _re_refused(fn, f"the escape \\{e}")
            i += 2
            continue
        if ch == "[":  # a bracket expression: to its closing ] (one first is a member)
            j = i + 1 + (pattern.startswith("^", i + 1))
            j += pattern.startswith("]", j)
            while j < n and pattern[j] != "]":
                if pattern[j] == "[" and pattern[j + 1 : j + 2] in (":", "=", "."):
                    raise _re_refused(fn, "a POSIX bracket class")
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i : j + 1])
            i = j + 1
            continue
        if ch in "*+?}" and pattern.startswith("?", i + 1):
            raise _re_refused(fn, "a non-greedy quantifier")
        if ch == "(" and pattern.startswith("?P", i + 1):
            raise _re_refused(fn, "a named group")
        out.append(r"\Z" if ch == "$" else ch)
        i += 1
    if captures and (ambiguous or _ambiguous([*groups[0][3], pattern[groups[0][2]:]])):
        # which alternative a capture holds differs: PostgreSQL's (a|ab)(c|bcd)(d*) of
        # 'abcd' captures ab, c, d (each part as long as it can be, left to right), Python's
        # a, bcd, '' (the first alternative that leads to a match)
        raise _re_refused(fn, "an alternation (|) that is not of distinct words beside a capture group")
    return "".join(out)


_PLAIN = re.compile(r"(?:[A-Za-z0-9 _,:;=@#%&'\"<>/-]|\\[^A-Za-z0-9])*")


def _ambiguous(alternatives: list[str]) -> bool:
    # Whether alternatives (of one group) may match at one place in two ways: more than one
    # and not all literal words of which none begins another (case folded)
    if len(alternatives) < 2:
        return False
    if not all(_PLAIN.fullmatch(a) for a in alternatives):
        return True
    words = sorted(re.sub(r"\\(.)", r"\1", a).lower() for a in alternatives)
    return any(b.startswith(a) for a, b in zip(words, words[1:]))


def _empty_match(text: str) -> bool:
    try:
        return re.fullmatch(text, "") is not None
    except re.error:
        return True  # (not a whole expression alone: as if it could)


def _re_flags(flags: str, fn: str, glob: bool) -> tuple[int, bool]:
    # (re options, whether g was given): PostgreSQL's parse_re_flags and its errors
    options, g = re.S | re.ASCII, False  # (the C locale's classes and case: \w is no é, é matches no É)
    for f in flags:
        if f == "g":
            if not glob:
                raise ValueError(f'{fn}() does not support the "global" option')
            g = True
        elif f == "i":
            options |= re.I
        elif f == "c":
            options &= ~re.I
        elif f in _RE_OTHER_FLAGS:
            raise _re_refused(fn, f"the flag {f!r}")
        elif f not in _RE_FLAGS:
            raise ValueError(f'invalid regular expression option: "{f}"')
    return options, g


_RE_ERRORS = (("missing ), unterminated subpattern", "parentheses () not balanced"),
              ("unbalanced parenthesis", "parentheses () not balanced"),
              ("unterminated character set", "brackets [] not balanced"),
              ("nothing to repeat", "quantifier operand invalid"))


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, options: int, fn: str) -> tuple[re.Pattern, bool]:
    # (the pattern, whether a match may have several lengths at one start: then the
    # longest is sought, as PostgreSQL's greedy matching finds it)
    text = _re_text(pattern, fn)
    try:
        rx = re.compile(text, options)
    except re.error as e:
        # PostgreSQL's words where both refuse the pattern for one reason; any other
        # pattern Python refuses may be PostgreSQL's (a lookbehind of varying length)
        for python, pg in _RE_ERRORS:
            if str(e).startswith(python):
                raise ValueError(f"invalid regular expression: {pg}") from None
        raise _re_refused(fn, f"a pattern Python cannot read ({e})") from None
    return rx, _may_be_shorter(text)


def _may_be_shorter(text: str) -> bool:
    # Whether Python's first match at a place may be shorter than the longest there: some
    # alternation, or a quantifier other than a last one of one character or class (whose
    # greedy count is the longest: nothing after it backtracks)
    if "|" in text:
        return True
    flat = re.sub(r"\\.|\[\^?\]?[^\]]*\]", "a", re.sub(r"\(\?[:=!<]+", "(", text.removesuffix("\\Z")))
    last = re.search(r"(?:[*+?]|\{[0-9,]*\})$", flat)
    rest = flat[: last.start()] if last else flat
    return bool(re.search(r"[*+?{]", rest)) or (last is not None and rest.endswith(")"))


@functools.lru_cache(maxsize=1024)
def _ending(rx: re.Pattern, after: int) -> re.Pattern:
    # rx, matching only where exactly ``after`` characters follow its match
    return re.compile(f"(?:{rx.pattern})(?=[\\s\\S]{{{after}}}\\Z)", rx.flags)


def _matches(s: str, rx: re.Pattern, variable: bool, glob: bool) -> Iterator[re.Match]:
    # regexp.c's setup_regexp_matches: the leftmost match, the longest there (PostgreSQL's
    # greedy REs; Python's backtracking takes the first alternative that matches), then
    # (with g) the next from its end, one character further after an empty match
    start, n = 0, len(s)
    while start <= n:
        m = rx.search(s, start)
        if m is None:
            return
        if variable:
            for end in range(n, m.end(), -1):
                longer = _ending(rx, n - end).match(s, m.start())
                if longer is not None:
                    m = longer
                    break
        yield m
        if not glob:
            return
        start = m.end() + (m.start() == m.end())


def regexp_matches(s: str, pattern: str, flags: str = "") -> list[list[str | None]]:
    """PostgreSQL's ``regexp_matches(s, pattern, flags)``: a row per match (every match with
    flag ``g``, else the first) of its capture groups (the whole match when the pattern has
    none), a group that took no part NULL. The pattern is read by Python's ``re`` as
    PostgreSQL's ARE (see :func:`regexp_split`); a match is the longest at its start.

    >>> regexp_matches('foobarbequebaz', '(bar)(beque)')
    [['bar', 'beque']]
    >>> regexp_matches('a1b22', '[0-9]+', 'g'), regexp_matches('abc', 'x')
    ([['1'], ['22']], [])
    >>> regexp_matches('abcd', 'a|ab')
    [['ab']]
    """
    options, glob = _re_flags(flags, "regexp_matches", True)
    rx, variable = _compiled(pattern, options, "regexp_matches")
    return [list(m.groups()) if rx.groups else [m.group(0)] for m in _matches(s, rx, variable, glob)]


def regexp_match(s: str, pattern: str, flags: str = "") -> list[str | None] | None:
    """PostgreSQL's ``regexp_match``: the first match's capture groups (the whole match when
    the pattern has none), None when nothing matches; read as :func:`regexp_matches` reads
    the pattern (``g`` is PostgreSQL's error).

    >>> regexp_match("foobarbequebaz", "(bar)(beque)"), regexp_match("abc", "B", "i")
    (['bar', 'beque'], ['b'])
    >>> regexp_match("abc", "x") is None, regexp_match("abc", "(x)?b")
    (True, [None])
    """
    options, _ = _re_flags(flags, "regexp_match", False)
    rx, variable = _compiled(pattern, options, "regexp_match")
    m = next(_matches(s, rx, variable, False), None)
    return None if m is None else list(m.groups()) if rx.groups else [m.group(0)]


def regexp_split(s: str, pattern: str, flags: str = "", fn: str = "regexp_split_to_array") -> list[str]:
    """PostgreSQL's ``regexp_split_to_array(s, pattern, flags)``: the text between the
    matches, ignoring an empty match at the start or end of the text or right after a
    match (regexp.c's degenerate matches). Flags ``c``, ``i``, ``s``; ``g`` is PostgreSQL's
    error, a pattern Python reads otherwise (a POSIX class, a non-greedy quantifier) refused.

    >>> regexp_split('a b  c', r'\\s*'), regexp_split('abc', ''), regexp_split(',a,', ',')
    (['a', 'b', 'c'], ['a', 'b', 'c'], ['', 'a', ''])
    """
    options, _ = _re_flags(flags, fn, False)
    rx, variable = _compiled(pattern, options, fn)
    out, at, prev_end = [], 0, 0
    for m in _matches(s, rx, variable, True):
        if m.start() < len(s) and m.end() > prev_end:
            out.append(s[at : m.start()])
            at = m.end()
        prev_end = m.end()
    out.append(s[at:])
    return out


# ----------------------------------------------------------------------------- sizes

#: PostgreSQL 15's units of pg_size_pretty (dbsize.c): name, the limit below which it is
#: used, whether the value is half-rounded, its power of two.
_SIZE_UNITS = (("bytes", 10 * 1024, False, 0), ("kB", 20 * 1024 - 1, True, 10), ("MB", 20 * 1024 - 1, True, 20),
               ("GB", 20 * 1024 - 1, True, 30), ("TB", 20 * 1024 - 1, True, 40), ("PB", 20 * 1024 - 1, True, 50))


def pg_size_pretty(size: int) -> str:
    """PostgreSQL 15's ``pg_size_pretty(bigint)``: bytes below 10 kB, then each unit while
    below 20 of the next (half-rounded, C's division toward zero).

    >>> pg_size_pretty(10**6), pg_size_pretty(10 * 1024 - 1), pg_size_pretty(-10 * 1024**3)
    ('977 kB', '10239 bytes', '-10 GB')
    """
    for k, (name, limit, rounds, bits) in enumerate(_SIZE_UNITS):
        if k + 1 == len(_SIZE_UNITS) or abs(size) < limit:
            if rounds:
                size = _trunc_div(size + (-1 if size < 0 else 1), 2)[0]
            return f"{size} {name}"
        nxt = _SIZE_UNITS[k + 1]
        size = _trunc_div(size, 1 << (nxt[3] - bits - nxt[2] + rounds))[0]
    raise AssertionError("unreachable")  # pragma: no cover - the last unit always answers


# ----------------------------------------------------------------------------- over Arrow

def _arrow(fn, result: str, *types: str):
    # An Arrow function over rows of Python values (NULL in, NULL out): (cols) -> array.
    import pyarrow as pa

    out_type = {"VARCHAR": pa.string(), "INTERVAL": pa.month_day_nano_interval(),
                "TIMESTAMP": pa.timestamp("us"), "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
                "TIME": pa.time64("us"), "BLOB": pa.binary(), "VARCHAR[]": pa.list_(pa.string()),
                "VARCHAR[][]": pa.list_(pa.list_(pa.string())), "INTEGER": pa.int32()}[result]

    def read(col, t):
        if t in ("TIMESTAMP", "TIMESTAMPTZ"):
            return col.cast(pa.int64()).to_pylist()
        if t == "INTERVAL":
            return [None if v is None else (v.months, v.days, v.nanoseconds // 1000) for v in col.to_pylist()]
        return col.to_pylist()

    def write(v):
        if v is None or result != "INTERVAL":
            return v
        return pa.MonthDayNano([v[0], v[1], v[2] * 1000])

    def call(*cols):
        rows = zip(*(read(c, t) for c, t in zip(cols, types)))
        values = [None if any(a is None for a in r) else write(fn(*r)) for r in rows]
        if result in ("TIMESTAMP", "TIMESTAMPTZ", "TIME"):
            return pa.array(values, pa.time64("us") if result == "TIME" else pa.int64()).cast(out_type)
        return pa.array(values, out_type)

    return call


_DUCK = {"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE"}


def _entry(name: str, fn, result: str, *types: str) -> tuple:
    # (name, function over Arrow, argument types, result type) as colmz.sql.run registers them
    arrow = _arrow(fn, result, *types)
    over = {1: lambda a: arrow(a), 2: lambda a, b: arrow(a, b), 3: lambda a, b, c: arrow(a, b, c)}[len(types)]
    return name, over, tuple(_DUCK.get(t, t) for t in types), _DUCK.get(result, result)


def _infinite(micros: int) -> bool:
    return abs(micros) >= 2**63 - 1  # DuckDB's infinity and -infinity


def _to_char_ts(micros: int, fmt: str) -> str | None:
    # (PostgreSQL's to_char of an infinity or with an empty template is NULL)
    return None if _infinite(micros) or not fmt else to_char(micros, fmt)


def _to_char_tz(micros: int, fmt: str) -> str | None:
    return None if _infinite(micros) or not fmt else to_char(micros, fmt, "UTC")


def _date_bin(stride, source: int, origin: int) -> int:
    if _infinite(source):
        return source
    if _infinite(origin):
        raise ValueError("origin out of range")
    return date_bin(stride, source, origin)


def _interval_time(iv) -> int:
    import datetime

    us = iv[2] % USECS_PER_DAY  # (the time part's time of day; months and days dropped)
    return datetime.time(us // 3_600_000_000, us // 60_000_000 % 60, us // 1_000_000 % 60, us % 1_000_000)


def _percentile_over_arrow(lists, fractions, descending):
    # interval_percentile_cont over Arrow: a list of intervals, a fraction and an order per row
    import pyarrow as pa

    out = []
    for values, f, desc in zip(lists.to_pylist(), fractions.to_pylist(), descending.to_pylist()):
        r = None if values is None or f is None else interval_percentile_cont(
            [None if v is None else (v.months, v.days, v.nanoseconds // 1000) for v in values], f, bool(desc))
        out.append(None if r is None else pa.MonthDayNano([r[0], r[1], r[2] * 1000]))
    return pa.array(out, pa.month_day_nano_interval())


TO_CHAR = P + "to_char"
_TO_CHAR_TS, _TO_CHAR_TZ = P + "to_char_ts", P + "to_char_tz"
DATE_BIN = P + "date_bin"
_DATE_BIN_TS, _DATE_BIN_TZ = P + "date_bin_ts", P + "date_bin_tz"
JUSTIFY = {f: P + f for f in ("justify_hours", "justify_days", "justify_interval")}
QUOTE_IDENT, QUOTE_LITERAL = P + "quote_ident", P + "quote_literal"
_QUOTE_LITERAL_TEXT = P + "quote_literal_text"
INTERVAL_DIV = P + "interval_div"
INTERVAL_TIME = P + "interval_time"
#: PostgreSQL's ``interval * float8`` (:func:`interval_mul`).
INTERVAL_MUL = P + "interval_mul"
#: PostgreSQL's ``percentile_cont`` of intervals (:func:`interval_percentile_cont`) over a
#: list of the group's values and the fraction.
INTERVAL_PERCENTILE_CONT = P + "interval_percentile_cont"
#: An interval's months, days and microseconds as PostgreSQL keeps them (DuckDB keeps the
#: same three parts), and PostgreSQL's interval of three such sums (``interval_pl`` of
#: every value: each part summed alone, never normalised; past an int32 of months or days
#: or an int64 of microseconds "interval out of range").
INTERVAL_PARTS = tuple(P + "interval_" + part for part in ("months", "days", "micros"))
INTERVAL_OF_SUMS = P + "interval_of_sums"
#: PostgreSQL's text of an interval (:func:`interval_text`).
INTERVAL_OUT = P + "interval_out"
ARRAY_TO_STRING_NULL = P + "array_to_string_null"
#: PostgreSQL's ``array_cat`` (``||`` of two arrays): a NULL operand left out, NULL when both
#: are (DuckDB's ``list_concat`` of two NULLs is ``[]``).
ARRAY_CAT = P + "array_cat"
ENCODE, DECODE = P + "encode", P + "decode"
REGEXP_MATCHES, REGEXP_SPLIT = P + "regexp_matches", P + "regexp_split"
REGEXP_SPLIT_TABLE = P + "regexp_split_table"
REGEXP_MATCH_ARRAY = P + "regexp_match_array"
#: sha224 ... sha512 of bytea (bytea: DuckDB's sha256 prints hex text), each with its macro
#: refusing another argument type.
_SHA = {f: P + f + "_bytes" for f in ("sha224", "sha256", "sha384", "sha512")}
SHA = {f: P + f for f in _SHA}
PG_SIZE_PRETTY = P + "pg_size_pretty"
GET_BYTE, CONVERT_FROM, _LENGTH_IN = P + "get_byte", P + "convert_from", P + "length_in"
BIT_LENGTH = P + "bit_length"
#: colmz's array_length of any dimension (colmz.sql.translate's macro of that name).
_ARRAY_LENGTH = P + "array_length"
_PG_SIZE_PRETTY_INT = P + "pg_size_pretty_int"
LENGTH = P + "length"
_ENCODE_BYTES = P + "encode_bytes"

#: Functions that may give NULL for values (to_char of an infinity or with an empty template,
#: percentile_cont of no rows):
#: registered with DuckDB's special NULL handling (a NULL argument still gives NULL).
NULL_FUNCTIONS = (
    _entry(REGEXP_MATCH_ARRAY, regexp_match, "VARCHAR[]", "VARCHAR", "VARCHAR", "VARCHAR"),
    _entry(_TO_CHAR_TS, _to_char_ts, "VARCHAR", "TIMESTAMP", "VARCHAR"),
    _entry(_TO_CHAR_TZ, _to_char_tz, "VARCHAR", "TIMESTAMPTZ", "VARCHAR"),
    (INTERVAL_PERCENTILE_CONT, _percentile_over_arrow, ("INTERVAL[]", "DOUBLE", "BOOLEAN"), "INTERVAL"),
)
#: (name, function over Arrow, argument types, result type): registered on every colmz
#: connection (:func:`colmz.sql.run.connect`); a NULL argument gives NULL.
FUNCTIONS = (
    _entry(_DATE_BIN_TS, _date_bin, "TIMESTAMP", "INTERVAL", "TIMESTAMP", "TIMESTAMP"),
    _entry(_DATE_BIN_TZ, _date_bin, "TIMESTAMPTZ", "INTERVAL", "TIMESTAMPTZ", "TIMESTAMPTZ"),
    *(_entry(P + f, lambda iv, f=fn: f(*iv), "INTERVAL", "INTERVAL")
      for f, fn in (("justify_hours", justify_hours), ("justify_days", justify_days),
                    ("justify_interval", justify_interval))),
    _entry(QUOTE_IDENT, quote_ident, "VARCHAR", "VARCHAR"),
    _entry(_QUOTE_LITERAL_TEXT, quote_literal, "VARCHAR", "VARCHAR"),
    _entry(INTERVAL_DIV, lambda iv, f: interval_div(*iv, f), "INTERVAL", "INTERVAL", "DOUBLE"),
    _entry(INTERVAL_MUL, lambda iv, f: interval_mul(*iv, f), "INTERVAL", "INTERVAL", "DOUBLE"),
    _entry(INTERVAL_TIME, _interval_time, "TIME", "INTERVAL"),
    _entry(INTERVAL_OUT, lambda iv: interval_text(*iv), "VARCHAR", "INTERVAL"),
    _entry(_ENCODE_BYTES, encode, "VARCHAR", "BLOB", "VARCHAR"),
    _entry(DECODE, decode, "BLOB", "VARCHAR", "VARCHAR"),
    _entry(REGEXP_MATCHES, regexp_matches, "VARCHAR[][]", "VARCHAR", "VARCHAR", "VARCHAR"),
    _entry(REGEXP_SPLIT, regexp_split, "VARCHAR[]", "VARCHAR", "VARCHAR", "VARCHAR"),
    _entry(REGEXP_SPLIT_TABLE, lambda s, p, f: regexp_split(s, p, f, "regexp_split_to_table"), "VARCHAR[]",
           "VARCHAR", "VARCHAR", "VARCHAR"),
    *(_entry(_SHA[f], lambda b, f=f: hashlib.new(f, b).digest(), "BLOB", "BLOB") for f in _SHA),
    _entry(_PG_SIZE_PRETTY_INT, pg_size_pretty, "VARCHAR", "BIGINT"),
    _entry(GET_BYTE, get_byte, "INTEGER", "BLOB", "INTEGER"),
    _entry(CONVERT_FROM, convert_from, "VARCHAR", "BLOB", "VARCHAR"),
    _entry(_LENGTH_IN, lambda b, e: len(convert_from(b, e)), "INTEGER", "BLOB", "VARCHAR"),
)

_TO_CHAR_REFUSAL = ("to_char() of a number or an interval is not supported by colmz (Materialize formats "
                    "timestamps only)")
_QUOTE_REFUSAL = ("quote_literal() of a value other than text or an integer is not supported by colmz "
                  "(PostgreSQL prints it with its type''s output function)")
_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")
_SIZE_REFUSAL = ("pg_size_pretty() of a value that is not an integer is not supported by colmz (PostgreSQL prints "
                 "a numeric''s fraction)")
#: Macros choosing by their arguments' types (DuckDB 1.4 or later), each with its form for an
#: older DuckDB: (macro, fallback).
TYPED_MACROS = (
    (f"CREATE OR REPLACE MACRO {TO_CHAR}(x TIMESTAMP, f) AS {_TO_CHAR_TS}(x, f), "
     f"(x TIMESTAMP WITH TIME ZONE, f) AS {_TO_CHAR_TZ}(x, f), "
     f"(x DATE, f) AS {_TO_CHAR_TZ}(CAST(x AS TIMESTAMP WITH TIME ZONE), f), "
     f"(x, f) AS CAST(error('{_TO_CHAR_REFUSAL}') AS VARCHAR)",
     f"CREATE OR REPLACE MACRO {TO_CHAR}(x, f) AS CAST(error('to_char() is not supported by colmz with "
     "this DuckDB (DuckDB 1.4 or later can)') AS VARCHAR)"),
    (f"CREATE OR REPLACE MACRO {DATE_BIN}(s, x TIMESTAMP, o) AS {_DATE_BIN_TS}(s, x, o), "
     f"(s, x TIMESTAMP WITH TIME ZONE, o) AS "
     f"{_DATE_BIN_TZ}(s, x, CAST(o AS TIMESTAMP WITH TIME ZONE)), "
     f"(s, x DATE, o) AS {_DATE_BIN_TZ}(s, CAST(x AS TIMESTAMP WITH TIME ZONE), "
     f"CAST(o AS TIMESTAMP WITH TIME ZONE)), (s, x, o) AS {_DATE_BIN_TS}(s, x, o)",
     f"CREATE OR REPLACE MACRO {DATE_BIN}(s, x, o) AS {_DATE_BIN_TS}(s, x, o)"),
    (f"CREATE OR REPLACE MACRO {ENCODE}(x BLOB, f) AS {_ENCODE_BYTES}(x, f), (x, f) AS CAST(error('encode() of "
     "a value that is not bytea is not supported by colmz (PostgreSQL encodes bytea only)') AS VARCHAR)",
     f"CREATE OR REPLACE MACRO {ENCODE}(x, f) AS {_ENCODE_BYTES}(x, f)"),
    # (PostgreSQL's lengths are integers, DuckDB's bigints: length(x) * 1000000000 overflows)
    (f"CREATE OR REPLACE MACRO {LENGTH}(x BLOB) AS CAST(octet_length(x) AS INTEGER), (x) AS CAST(length(x) AS INTEGER)",
     f"CREATE OR REPLACE MACRO {LENGTH}(x) AS CAST(length(x) AS INTEGER)"),
    (f"CREATE OR REPLACE MACRO {BIT_LENGTH}(x BLOB) AS CAST(octet_length(x) * 8 AS INTEGER), "
     "(x) AS CAST(bit_length(x) AS INTEGER)",
     f"CREATE OR REPLACE MACRO {BIT_LENGTH}(x) AS CAST(bit_length(x) AS INTEGER)"),
    *((f"CREATE OR REPLACE MACRO {SHA[f]}(x BLOB) AS {_SHA[f]}(x), (x) AS CAST(error('{f}() of a value that is "
       "not bytea is not supported by colmz (PostgreSQL hashes bytea only)') AS BLOB)",
       f"CREATE OR REPLACE MACRO {SHA[f]}(x) AS {_SHA[f]}(x)") for f in _SHA),
    (f"CREATE OR REPLACE MACRO {PG_SIZE_PRETTY}"
     + ", ".join(f"(x {t}) AS {_PG_SIZE_PRETTY_INT}(x)" for t in _INTEGERS) + ", "
     + f"(x) AS CAST(error('{_SIZE_REFUSAL}') AS VARCHAR)",
     f"CREATE OR REPLACE MACRO {PG_SIZE_PRETTY}(x) AS CAST(error('{_SIZE_REFUSAL}') AS VARCHAR)"),
    (f"CREATE OR REPLACE MACRO {QUOTE_LITERAL}(x VARCHAR) AS {_QUOTE_LITERAL_TEXT}(x), "
     + "".join(f"(x {t}) AS {_QUOTE_LITERAL_TEXT}(CAST(x AS VARCHAR)), " for t in _INTEGERS)
     + f"(x) AS CAST(error('{_QUOTE_REFUSAL}') AS VARCHAR)",
     f"CREATE OR REPLACE MACRO {QUOTE_LITERAL}(x) AS {_QUOTE_LITERAL_TEXT}(CAST(x AS VARCHAR))"),
)
# ----------------------------------------------------------------------------- years BC
# PostgreSQL and DuckDB keep a date's year alike (astronomical: 0 is 1 BC, -43 is 44 BC, as
# PostgreSQL's tm_year), so their arithmetic, order and age() agree; they differ where the
# year is read or written as text or as a number.

#: PostgreSQL's text of a date, timestamp or timestamptz (``date_out``, ``timestamp_out``):
#: DuckDB's text with its `` (BC)`` after the date moved to the end as `` BC``
#: (``0044-03-12 12:30:00 BC``, ``0001-12-31 00:00:00+00 BC``); of other types DuckDB's text.
DATETIME_TEXT = P + "datetime_text"
_DATETIMES = ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE")
#: The list types whose elements ``array_to_string`` prints by PostgreSQL's text of each
#: (:data:`colmz.sql.translate.ANY_TEXT`: a float's shortest digits, a date's year BC), as
#: SQL's tuple of DuckDB's names.
TEXT_ELEMENTS = f"({', '.join(repr(t + '[]') for t in ('DOUBLE', 'FLOAT', *_DATETIMES))})"

#: extract's (and date_part's) units of the year, by their spellings (PostgreSQL's and
#: DuckDB's): their macro, PostgreSQL's count where the year is 1 BC or earlier (``y`` the
#: astronomical year, DuckDB's) -- ``timestamp_part``'s: a year has no zero (1 BC is -1),
#: a decade is ``-((8 - (y - 1)) / 10)``, a century ``-((99 - (y - 1)) / 100)``, a millennium
#: ``-((999 - (y - 1)) / 1000)``; an ISO year of 0 or less one less. DuckDB's own where the
#: year is later, and of an interval (whose years are a count, not a calendar's).
_YEAR_PARTS = {
    "year": ("year", "y > 0", "y - 1"), "decade": ("year", "y >= 0", "-((8 - (y - 1)) // 10)"),
    "century": ("year", "y > 0", "-((99 - (y - 1)) // 100)"),
    "millennium": ("year", "y > 0", "-((999 - (y - 1)) // 1000)"), "isoyear": ("isoyear", "y > 0", "y - 1"),
}
_YEAR_UNITS = {**dict.fromkeys(("year", "years", "y", "yr", "yrs"), "year"),
               **dict.fromkeys(("decade", "decades", "dec", "decs"), "decade"),
               **dict.fromkeys(("century", "centuries", "cent", "c"), "century"),
               **dict.fromkeys(("millennium", "millennia", "millenium", "millenniums", "mil", "mils"), "millennium"),
               "isoyear": "isoyear"}
_YEAR_PART = {kind: P + "bc_" + kind for kind in _YEAR_PARTS}

#: ``date_trunc('decade', x)`` (``timestamp_trunc``): PostgreSQL's decade of a year 1 BC or
#: earlier is ``-((8 - (y - 1)) / 10) * 10`` (44 BC's is 51 BC), DuckDB's rounds toward zero.
TRUNC_DECADE = P + "trunc_decade"
#: The year ``make_date``, ``make_timestamp`` and ``make_timestamptz`` read: a negative year
#: is that year BC (-44 is 44 BC, DuckDB's -43), zero PostgreSQL's range error.
_MAKE_YEAR, _MAKE_YEAR_TZ = P + "make_year", P + "make_year_tz"  # (DuckDB's timestamptz reads -44 as 44 BC)
_MAKE_FUNCTIONS = ("make_date", "make_timestamp", "make_timestamptz")


#: The units whose value PostgreSQL gives for an infinite date or timestamp: its sign's
#: infinity (``src/backend/utils/adt/timestamp.c``: NonFiniteTimestampTzPart, monotonic units);
#: every other unit is NULL there, as DuckDB's date_part of an infinity is.
INFINITE_UNITS = frozenset({*_YEAR_UNITS, "epoch", "julian", "j"})
#: ``{INFINITE_PART}(p, x)``: ``p``, the part of ``x`` DuckDB gives (a double), or, where
#: it is NULL for a value (an infinity), PostgreSQL's infinity of ``x``'s sign.
#: ``{INFINITE_REFUSED}(p, x)``: ``p``, refused where it is NULL for a value (extract's
#: numeric infinity, which DuckDB's DECIMAL lacks).
INFINITE_PART = P + "infinite_part"
INFINITE_REFUSED = P + "infinite_refused"


def infinite_part(unit: str, part: str, x: str, exact: bool) -> str:
    """``part`` (DuckDB's text of the ``unit`` of ``x``) as PostgreSQL gives it of an
    infinite ``x``: ``date_part``'s (a double) infinity of ``x``'s sign, ``extract``'s
    (``exact``, a numeric) refused; ``part`` itself for a unit that is NULL of an infinity.

    >>> from colmz.sql import connect
    >>> connect().sql("SELECT " + infinite_part("year", "date_part('year', x)", "x", False)
    ...               + " FROM (VALUES (DATE '-infinity'), (DATE '2020-01-01')) v(x)").fetchall()
    [(-inf,), (2020.0,)]
    >>> infinite_part("month", "p", "x", False)
    'p'
    """
    if unit not in INFINITE_UNITS:
        return part
    return f"{INFINITE_REFUSED if exact else INFINITE_PART}({part}, {x})"


def year_part(unit: str, x: str) -> str | None:
    """The DuckDB text of PostgreSQL's ``extract(unit FROM x)`` (a ``BIGINT``, as DuckDB's
    ``date_part``) when ``unit`` is one of the year's (year, decade, century, millennium,
    ISO year, in any of their spellings), else None: of a date or timestamp 1 BC or earlier
    PostgreSQL's count (a year has no zero), else DuckDB's.

    >>> from colmz.sql import connect
    >>> connect().sql("SELECT " + year_part("year", "DATE '0001-01-01' - 1") + ", "
    ...               + year_part("century", "DATE '0001-01-01' - 16000")).fetchall()
    [(-1, -1)]
    >>> year_part("month", "x") is None
    True
    """
    kind = _YEAR_UNITS.get(unit)
    return None if kind is None else f"{_YEAR_PART[kind]}({x})"


def _make_call(c):
    # make_date(y, m, d), make_timestamp(y, ...): the year as PostgreSQL reads it
    if not c.plain or len(c.arguments) < 3:
        return None
    y, m, d = c.args[:3]
    year = _MAKE_YEAR_TZ if c.name == "make_timestamptz" else _MAKE_YEAR
    return f"{c.name}({', '.join((f'{year}({y}, {m}, {d})', *c.args[1:]))})"


def _utc_part(part: str) -> str:
    # DuckDB's ``part`` of the macro's argument x read as a timestamp (a timestamptz at UTC)
    return f"date_part('{part}', TRY_CAST(x AS TIMESTAMP))"


def _two_digits(n: str) -> str:
    # C's %02d of the integer n
    return f"CASE WHEN {n} BETWEEN 0 AND 9 THEN '0' ELSE '' END || CAST({n} AS VARCHAR)"


_BC_MACROS = (
    f"CREATE OR REPLACE MACRO {DATETIME_TEXT}(x) AS CASE WHEN typeof(x) IN ({', '.join(map(repr, _DATETIMES))}) "
    "THEN regexp_replace(CAST(x AS VARCHAR), ' \\(BC\\)(.*)$', '\\1 BC') ELSE CAST(x AS VARCHAR) END",
    # (the year read of x as a timestamp at UTC, colmz's zone: DuckDB's of a timestamptz is
    # the year of its era, 44 for 44 BC)
    *(f"CREATE OR REPLACE MACRO {_YEAR_PART[kind]}(x) AS CASE WHEN typeof(x) = 'INTERVAL' OR coalesce("
      f"{test.replace('y', _utc_part(part))}, true) THEN date_part({kind!r}, x) "
      f"ELSE CAST({bc.replace('y', _utc_part(part))} AS BIGINT) END"
      for kind, (part, test, bc) in _YEAR_PARTS.items()),
    f"CREATE OR REPLACE MACRO {TRUNC_DECADE}(x) AS CASE WHEN typeof(x) = 'INTERVAL' OR coalesce("
    f"{_utc_part('year')} > 0, true) THEN date_trunc('decade', x) ELSE date_trunc('year', x) - to_years(CAST("
    f"{_utc_part('year')} + ((8 - ({_utc_part('year')} - 1)) // 10) * 10 AS INTEGER)) END",
    f"CREATE OR REPLACE MACRO {_MAKE_YEAR}(y, m, d) AS CASE WHEN y < 0 THEN y + 1 WHEN y = 0 THEN "
    f"error('date field value out of range: 0-' || {_two_digits('m')} || '-' || {_two_digits('d')}) ELSE y END",
    f"CREATE OR REPLACE MACRO {_MAKE_YEAR_TZ}(y, m, d) AS CASE WHEN y = 0 THEN "
    f"error('date field value out of range: 0-' || {_two_digits('m')} || '-' || {_two_digits('d')}) ELSE y END",
)


_ARRAY_DIMS = P + "array_dims"  # (colmz.sql.translate's number of dimensions of an array)
_ARRAY_TO_STRING = P + "array_to_string"  # (colmz.sql.transforms' two-argument form)
_NUMERIC_ELEMENTS = ("array_to_string() of numeric elements is not supported by colmz (PostgreSQL prints "
                     "each element''s own scale)")
#: Untyped macros. ``array_to_string(a, d, n)`` prints each element as the two-argument form
#: does (a boolean as t/f, a double by its shortest digits), a NULL one as ``n``; with a NULL
#: ``n`` it is the two-argument form (NULL elements left out). ``string_to_array(s, d, n)``:
#: elements equal to ``n`` are NULL (none when ``n`` is NULL).
_PART_MONTHS, _PART_DAYS, _PART_MICROS = INTERVAL_PARTS
MACROS = (
    f"CREATE OR REPLACE MACRO {INFINITE_PART}(p, x) AS CASE WHEN p IS NOT NULL OR x IS NULL THEN p "
    "WHEN starts_with(CAST(x AS VARCHAR), '-') THEN CAST('-infinity' AS DOUBLE) ELSE CAST('infinity' AS DOUBLE) END",
    f"CREATE OR REPLACE MACRO {INFINITE_REFUSED}(p, x) AS CASE WHEN p IS NULL AND x IS NOT NULL THEN "
    "error('extract() of an infinite date or timestamp is not supported by colmz (PostgreSQL''s is a numeric "
    "infinity, which DuckDB''s DECIMAL has not)') ELSE p END",
    f"CREATE OR REPLACE MACRO {_PART_MONTHS}(x) AS datepart('year', x) * 12 + datepart('month', x)",
    f"CREATE OR REPLACE MACRO {_PART_DAYS}(x) AS datepart('day', x)",
    f"CREATE OR REPLACE MACRO {_PART_MICROS}(x) AS datepart('hour', x) * 3600000000 + datepart('minute', x) * 60000000 "
    "+ datepart('microseconds', x)",
    f"CREATE OR REPLACE MACRO {INTERVAL_OF_SUMS}(m, d, t) AS CASE WHEN m NOT BETWEEN {_INT32[0]} AND {_INT32[1]} "
    f"OR d NOT BETWEEN {_INT32[0]} AND {_INT32[1]} OR t NOT BETWEEN {-(2**63)} AND {2**63 - 1} "
    "THEN error('interval out of range') ELSE to_months(CAST(m AS INTEGER)) + to_days(CAST(d AS INTEGER)) "
    "+ to_microseconds(CAST(t AS BIGINT)) END",
    # array_cat (and || of arrays): NULL only when both are (DuckDB's list_concat of two NULLs
    # is []); of two arrays of several dimensions, their sub-arrays of one shape (PostgreSQL's
    # error; DuckDB's lists of lists may be ragged)
    f"CREATE OR REPLACE MACRO {ARRAY_CAT}(a, b) AS CASE WHEN a IS NULL AND b IS NULL THEN NULL "
    f"WHEN {_ARRAY_DIMS}(a) >= 2 AND len(a) > 0 AND len(b) > 0 "
    f"AND NOT list_bool_and([{_ARRAY_LENGTH}(a, d) IS NOT DISTINCT FROM {_ARRAY_LENGTH}(b, d) "
    f"FOR d IN range(2, {_ARRAY_DIMS}(a) + 1)]) THEN error('cannot concatenate incompatible arrays') "
    "ELSE list_concat(a, b) END",
    f"CREATE OR REPLACE MACRO {ARRAY_TO_STRING_NULL}(a, d, n) AS CASE WHEN n IS NULL THEN "
    f"{_ARRAY_TO_STRING}(a, d) WHEN typeof(a) = 'BOOLEAN[]' THEN "
    "array_to_string([coalesce(left(CAST(x AS VARCHAR), 1), n) FOR x IN a], d) "
    f"WHEN typeof(a) IN {TEXT_ELEMENTS} THEN array_to_string([coalesce({P}text(x), n) FOR x IN a], d) "
    f"WHEN typeof(a) LIKE 'DECIMAL%' THEN error('{_NUMERIC_ELEMENTS}') "
    "ELSE array_to_string([coalesce(CAST(x AS VARCHAR), n) FOR x IN a], d) END",
    *_BC_MACROS,
)


def string_to_array_null(split: str, null_text: str) -> str:
    """The DuckDB text of ``string_to_array(s, d, null_text)`` given ``split``, the text of
    ``string_to_array(s, d)``: elements equal to ``null_text`` are NULL (none when it is
    NULL)."""
    return f"[CASE WHEN {P}x = ({null_text}) THEN NULL ELSE {P}x END FOR {P}x IN {split}]"




# ----------------------------------------------------------------------------- rules

def _type_of(e, text: str) -> str:
    # The type a node visibly has ("" when not visible): a typed literal or a cast's type as
    # written (lower case, words joined by one space), or what a call here returns.
    if e.cls == "CAST" and len(e.children) == 2 and not text[e.start : e.start + 8].upper().startswith("TRY_CAST"):
        t = e.children[1]
        if t.children:
            return ""
        if t.start >= 0:
            return " ".join(text[t.start : t.end].lower().split())
        m = re.match(r"\s*(\w+)", text[e.start : e.end])  # (INTERVAL '1 hour': the type is not placed)
        return m.group(1).lower() if m else ""
    if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in JUSTIFY:
        return "interval"
    return ""


def _interval(e, text: str) -> bool:
    return _type_of(e, text) == "interval"


def _time(e, text: str) -> bool:
    return _type_of(e, text) in ("time", "time without time zone")


def _call(name: str, arity: tuple[int, ...]):
    def rule(c):
        if not c.plain or len(c.arguments) not in arity:
            return None
        return f"{name}({', '.join(c.args)})"
    return rule


def _divide(c):
    # interval / number (a number's type is DuckDB's: a double, or refused when it binds)
    left, right = c.node.children
    return f"{INTERVAL_DIV}({c.text_of(left)}, CAST({c.text_of(right)} AS DOUBLE))"


def _time_minus_time(c):
    # PostgreSQL's time - time: an interval of microseconds, negative when the right is later
    a, b = (c.text_of(k) for k in c.node.children)
    return f"to_microseconds(epoch_us(CAST({a} AS TIME)) - epoch_us(CAST({b} AS TIME)))"


def _interval_to_time(c):
    return f"{INTERVAL_TIME}({c.text_of(c.node.children[0])})"


def _encode(c):
    # a string literal is bytea's input text (PostgreSQL's, not DuckDB's escapes)
    if not c.plain or len(c.arguments) != 2:
        return None
    x, f = c.arguments
    data = f"{BYTEA_IN}({c.text_of(x)})" if x.literal is not None and x.literal.kind == "STRING" else c.text_of(x)
    return f"{ENCODE}({data}, {c.text_of(f)})"


def _texts(c, n: int) -> list[str]:
    # the call's arguments cast to text, the missing flags argument ''
    args = [*c.args, *(["''"] * (n - len(c.args)))]
    return [f"CAST({a} AS VARCHAR)" for a in args]


def _set_returning(function: str):
    # regexp_matches, regexp_split_to_table: a row per element of the list ``function``
    # gives -- in the select list unnest's rows, in FROM a subquery of them named as
    # PostgreSQL names the call's column
    def rule(c):
        if c.window or c.node.filter is not None or c.node.order_by or c.node.distinct \
                or len(c.arguments) not in (2, 3):
            return None
        if c.inside:
            raise UnsupportedSQL(f"{c.name}() inside {c.inside} is not supported by colmz (PostgreSQL does not "
                                 "allow set-returning functions there)")
        rows = f"unnest({function}({', '.join(_texts(c, 3))}))"
        return from_rows(c, rows) if c.table else rows
    return rule


def _regexp_call(name: str):
    # regexp_match, regexp_split_to_array: the call of colmz's function of text arguments
    def rule(c):
        if not c.plain or len(c.arguments) not in (2, 3):
            return None
        return f"{name}({', '.join(_texts(c, 3))})"
    return rule


#: date_part's units whose value PostgreSQL gives with the seconds' fraction (DuckDB's are
#: whole): the divisor of the microseconds.
_FRACTION_UNITS = {**dict.fromkeys(("second", "seconds", "s", "sec", "secs"), "1000000.0"),
                   **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs", "millisecon"), "1000.0")}


def date_part(c):
    """PostgreSQL's ``date_part(unit, x)`` (a rule of :data:`colmz.sql.transforms.CALLS`, which
    checks the zone's units first): a double precision, seconds and milliseconds with their
    fraction, the year's units of a year BC as PostgreSQL counts them (:func:`year_part`); a
    unit that is not a literal is refused (its kind is not known here)."""
    if not c.plain or len(c.arguments) != 2:
        return None
    unit = c.arguments[0].literal
    if unit is None or unit.kind != "STRING":
        raise UnsupportedSQL("date_part() of a unit that is not a string literal is not supported by colmz")
    divisor = _FRACTION_UNITS.get(unit.text.lower())
    if divisor is not None:
        return f"CAST(date_part('microsecond', {c.args[1]}) / {divisor} AS DOUBLE)"
    u = unit.text.lower()
    part = f"CAST({year_part(u, c.args[1]) or f'date_part({c.args[0]}, {c.args[1]})'} AS DOUBLE)"
    return infinite_part(u, part, c.args[1], False)




def _bytea_call(name: str, arity: tuple[int, ...]):
    # a call whose first argument is bytea: a string literal there is bytea's input text
    def rule(c):
        if not c.plain or len(c.arguments) not in arity:
            return None
        x = c.arguments[0]
        data = f"{BYTEA_IN}({c.text_of(x)})" if x.literal is not None and x.literal.kind == "STRING" else c.text_of(x)
        return f"{name}({', '.join((data, *c.args[1:]))})"
    return rule


def _length(c):
    # length(text | bytea), length(bytea, encoding): its characters in that encoding
    return _bytea_call(_LENGTH_IN, (2,))(c) if len(c.arguments) == 2 else _call(LENGTH, (1,))(c)


def _generate_subscripts(c):
    # PostgreSQL's generate_subscripts(a, dim[, reverse]): the subscripts of dimension dim
    # (none for a NULL array or a dimension it lacks), a row each -- as unnest's rows in
    # the select list, a subquery of them in FROM; DuckDB's reads one dimension only
    if c.window or c.node.filter is not None or c.node.order_by or c.node.distinct or len(c.arguments) not in (2, 3):
        return None
    if c.inside:
        raise UnsupportedSQL(f"generate_subscripts() inside {c.inside} is not supported by colmz (PostgreSQL does "
                             "not allow set-returning functions there)")
    n = f"{_ARRAY_LENGTH}({c.args[0]}, {c.args[1]})"
    series = f"range(1, {n} + 1)"
    if len(c.arguments) == 3:
        series = f"CASE WHEN {c.args[2]} THEN range({n}, 0, -1) ELSE {series} END"
    rows = f"unnest({series})"
    return from_rows(c, rows) if c.table else rows


#: Function name as written -> rule (entries of :data:`colmz.sql.transforms.CALLS`).
CALLS = {
    "regexp_matches": _set_returning(REGEXP_MATCHES), "regexp_split_to_table": _set_returning(REGEXP_SPLIT_TABLE),
    "regexp_split_to_array": _regexp_call(REGEXP_SPLIT), "regexp_match": _regexp_call(REGEXP_MATCH_ARRAY),
    "pg_size_pretty": _call(PG_SIZE_PRETTY, (1,)), **{f: _bytea_call(m, (1,)) for f, m in SHA.items()},
    "get_byte": _bytea_call(GET_BYTE, (2,)), "convert_from": _bytea_call(CONVERT_FROM, (2,)),
    "bit_length": _call(BIT_LENGTH, (1,)), "generate_subscripts": _generate_subscripts,
    "array_cat": _call(ARRAY_CAT, (2,)),
    "to_char": _call(TO_CHAR, (2,)),
    "date_bin": _call(DATE_BIN, (3,)),
    **dict.fromkeys(_MAKE_FUNCTIONS, _make_call),
    **{f: _call(m, (1,)) for f, m in JUSTIFY.items()},
    "encode": _encode, "decode": _call(DECODE, (2,)), "length": _length,
    "char_length": _call(LENGTH, (1,)), "character_length": _call(LENGTH, (1,)),
    # an integer in PostgreSQL, a bigint in DuckDB
    **dict.fromkeys(("strpos", "position"), lambda c: f"CAST({c.by(None)} AS INTEGER)" if c.plain else None),
    "quote_ident": _call(QUOTE_IDENT, (1,)),
    "quote_literal": _call(QUOTE_LITERAL, (1,)),
    "quote_nullable": lambda c: f"coalesce({_call(QUOTE_LITERAL, (1,))(c)}, 'NULL')"
    if _call(QUOTE_LITERAL, (1,))(c) else None,
}

#: (node keys, rule, when(node, text), trigger words, trigger operators): the operator and
#: cast entries of the table of transforms (a DuckDB operator's name, or ``CAST``). A text
#: is read as a tree for them only when it holds a trigger (``/``; the word ``time``): an
#: ``INTERVAL '2s'`` alone costs nothing.
OPERATORS = (
    (("/", "//"), _divide, lambda e, text: e.cls == "FUNCTION" and len(e.children) == 2
     and _interval(e.children[0], text), (), ("/",)),
    (("-",), _time_minus_time, lambda e, text: e.cls == "FUNCTION" and len(e.children) == 2
     and _time(e.children[0], text) and _time(e.children[1], text), ("time",), ()),
    (("CAST",), _interval_to_time, lambda e, text: _time(e, text) and _interval(e.children[0], text),
     ("time",), ()),
)

