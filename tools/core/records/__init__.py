"""Records: their Structs, schemas, JSONL reading and writing, keys. Before it was a package,
endstate.core.records was a module holding the JSONL readers: those names are answered for one
release, with a DeprecationWarning."""

from endstate.core.deprecation import moved_names

_JSONL = "endstate.core.records.jsonl"
_READ = "from endstate.api import read_records (records come back as typed Structs)"
__getattr__ = moved_names(__name__, {
    "read_jsonl": (_JSONL, _READ),
    "write_jsonl": (_JSONL, "from endstate.api import write_records"),
    "SkipLog": (_JSONL, _READ),
    "Loc": (_JSONL, _READ),
})
