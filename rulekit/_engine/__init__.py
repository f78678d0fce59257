"""The tracing engine: traced values, the tape, one traced call, running a function on a trace.

Modules, lowest first (each imports only from the ones before it and from the
layers below the engine: tangents, registry, stateful rules):

* `_state`: which traces are running in this thread;
* `_tape`: the trace as data (records, slots) and the reverse pass;
* `_primal_only`, `_wrappers`, `_refusals`, `_operators`: what traced values
  answer on primal values, the hints and errors they raise, their operators;
* `_traced`: `Traced`, the value user code sees while tracing;
* `_call`: one traced call (arguments → CoDuals, dispatch, outputs → traced);
* `_primitive`: `rulekit.primitive` wrappers;
* `_trace`: `Tracer`, running a function on traced inputs and its reverse pass.

Traced values reach `_call` through their tape (`tape.call(f, args, kwargs)`):
the tapes the engine makes are `_call.CallTape`s.
"""
