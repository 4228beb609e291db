package bench

import (
	"fmt"
	"runtime"
	"runtime/metrics"
)

// minHeldBytes is less than a suspended context can hold on the host:
// the daemon keeps its entry and record (ids, identity, template, times,
// labels), 0.7 to 3.6 KiB in steady runs (docs/state.md). A mean under it
// is the noise of two heap reads, not a measurement: 2 GiB over 40 bytes
// once read as 53 million contexts "met".
const minHeldBytes = 256

// heldUnmeasured says why per, the host bytes a suspended context was
// read to hold, is no measurement ("" when it is one): nothing was read
// (<= 0: the GC shrank the heap between the reads and no process or tmpfs
// was left), or less than a context's entry and record alone.
func heldUnmeasured(per float64) string {
	switch {
	case per <= 0:
		return "not measured: no memory read per context"
	case per < minHeldBytes:
		return fmt.Sprintf("not measured: %.0f bytes read per context, under the %d bytes a context's entry and record alone take in the daemon (the reads' noise)", per, minHeldBytes)
	}
	return ""
}

// heldPerContext is what each of k contexts holds on the host: the
// daemon's live heap grown between before and after (0 when the GC shrank
// it), plus the bytes read outside it (sandboxes' PSS, tmpfs mounts), all
// over k. perHeap is the heap's share alone.
func heldPerContext(k int, before, after uint64, outside int64) (per, perHeap float64) {
	if after > before {
		perHeap = float64(after-before) / float64(k)
	}
	return perHeap + float64(outside)/float64(k), perHeap
}

// liveHeap forces a GC and returns the heap it found live
// (/gc/heap/live:bytes): unlike HeapAlloc read after it, allocations of
// other goroutines since the GC ended do not count.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
