# A bytecode cache for the Python modules Ansible ships to the fleet guests (tests/vm/fleet-ansible.sh).
#
# Every Ansible module run sends its module and the module_utils it imports as a zip
# (AnsiballZ) and imports them from it with zipimport, which never reads or writes bytecode:
# each run compiles ansible.module_utils.basic and its imports again from source. Under TCG
# that was 5.3 of a ping's 6-7 guest CPU-seconds (python3 -X importtime in the guest,
# 2026-11-30), ~86 module runs per fleet run. fleet-guest-boot.sh puts this file (as ansible_zip_bytecode.py) and a .pth
# that imports it into the guest's site directory; the hook serves only the AnsiballZ payload
# zips and caches each module's code object by the hash of its source, so what runs is
# exactly what the controller sent (a changed module_utils is a new hash), compiled once.
# Nothing else in the guest changes: any other path, or any error here, is left to Python's
# own importers.
import marshal
import os
import sys
import types
import zipimport

# The guest's cache; the variable is for the hook's own test (tune/tests/it/fleet_tools.rs).
_CACHE = os.environ.get("ANSIBLE_ZIP_BYTECODE_CACHE", "/var/cache/daqtune-test-bytecode")
_TAG = sys.implementation.cache_tag or "python"


def _refile(code, filename):
    """The code object with its (and its nested code objects') file name set to FILENAME."""
    consts = tuple(
        _refile(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


class _CachingZipImporter(zipimport.zipimporter):
    def _source_path(self, fullname):
        """The module's source file in the archive, or None (Python's importer decides)."""
        inner = self.prefix + fullname.rpartition(".")[2]
        for candidate in (inner + os.sep + "__init__.py", inner + ".py"):
            if candidate in self._files:
                return self.archive + os.sep + candidate
        return None

    # zipimporter.get_filename compiles the module to find its file name (Python 3.11), and
    # the module spec asks for it before get_code compiles it again.
    def get_filename(self, fullname):
        try:
            filename = self._source_path(fullname)
        except Exception:  # another Python's zipimporter internals: Python's own way
            filename = None
        return filename if filename is not None else super().get_filename(fullname)

    def get_code(self, fullname):
        try:
            filename = self._source_path(fullname)
            if filename is None:
                return super().get_code(fullname)
            source = self.get_data(filename)
            import hashlib  # here: a guest Python that imports no payload never loads it

            key = hashlib.sha256(source).hexdigest()
            path = os.path.join(_CACHE, _TAG, key[:2], key[2:] + ".bin")
            try:
                with open(path, "rb") as f:
                    return _refile(marshal.load(f), filename)
            except (OSError, EOFError, ValueError, TypeError):
                pass
            code = compile(source, filename, "exec", dont_inherit=True)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = "%s.%d.tmp" % (path, os.getpid())
                with open(tmp, "wb") as f:
                    marshal.dump(code, f)
                os.replace(tmp, path)
            except OSError:
                pass
            return code
        except Exception:  # the cache must never be why a module fails: Python's own way
            return super().get_code(fullname)


def _hook(path):
    # Only Ansible's payloads (ansible_<module>_payload.zip, see its AnsiballZ wrapper) and
    # the packages inside them (PAYLOAD.zip/ansible/module_utils).
    archive, sep, rest = path.partition("_payload.zip")
    if not sep or (rest and not rest.startswith(os.sep)):
        raise ImportError("not an AnsiballZ payload")
    if not os.path.basename(archive).startswith("ansible_"):
        raise ImportError("not an AnsiballZ payload")
    return _CachingZipImporter(path)


if _hook not in sys.path_hooks:
    sys.path_hooks.insert(0, _hook)
    sys.path_importer_cache.clear()
