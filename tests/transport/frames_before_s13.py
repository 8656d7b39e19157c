"""The console's side of a collector frame as it was before session 13 (issue 38,
branch issue38-frames13): ``CollectorBackend._fold`` and ``collector_wire.relayed_sample``,
copied verbatim (main ``31f101a``) as the reference ``test_frames_s13`` compares against."""

from __future__ import annotations

from probes.errors import ProtocolError
from probes.sources.collectors import FoldSlices, _Shard
from probes.transport.collector_wire import Batch, RelayedHello, RelayedTick, _decode_row
from probes.wire.events import Connected, Disconnected, Emit
from probes.wire.protocol import MessageReader
from probes.wire.samples import HostSample
from probes.wire.structs import chain_texts


def relayed_sample(reader: MessageReader, tick: RelayedTick) -> HostSample | None:
    static_id, body = tick
    reader.stats.lines += 1
    stream = reader.compact
    try:
        if stream is None or stream.static_id != static_id:
            raise ProtocolError("a relayed tick of another static message")
        row = _decode_row(body)
        texts = [d.name for d in row.disks]
        for g in row.gpus:
            if g.clock_reasons:
                texts += g.clock_reasons
        if row.pcie is not None:
            texts += chain_texts(row.pcie)
        text = "".join(texts)
        if not (text.isascii() and text.isprintable()):
            raise ProtocolError("a relayed tick's text is not printable")
        sample = stream.from_row(row)
    except Exception:  # one host's garbled tick, as its text would have been
        reader.stats.garbled += 1
        reader.bad_streak += 1
        return None
    reader.bad_streak = 0
    return sample


async def fold(shard: _Shard, batch: Batch, emit: Emit, slices: FoldSlices) -> None:
    specs = shard.job.specs
    for i, entry in batch:
        if slices.due():
            await slices.turn()
        host = specs[i].name
        if isinstance(entry, tuple):  # a v2 tick as its row: built, not parsed again
            reader = shard.readers.get(i)
            if reader is not None:
                sample = relayed_sample(reader, entry)
                if sample is not None:
                    emit(host, sample)
        elif isinstance(entry, RelayedHello):  # decoded there: taken, not parsed again
            reader = shard.readers.get(i)
            if reader is not None:
                emit(host, reader.relayed_hello(entry.hello, entry.columns))
        elif isinstance(entry, bytes):
            reader = shard.readers.get(i)
            if reader is not None:
                for msg in reader.feed(entry):
                    emit(host, msg)
        elif entry is None:
            reader = shard.readers.get(i)
            if reader is not None:
                for msg in reader.close():
                    emit(host, msg)
        else:
            if isinstance(entry, Connected):
                shard.readers[i] = MessageReader()
                shard.down.discard(i)
            elif isinstance(entry, Disconnected):
                shard.down.add(i)
            emit(host, entry)
