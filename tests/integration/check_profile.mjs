// Decodes a served profile with pprof-format (another vendor's decoder) and
// holds it to the rules scrapers enforce that go tool pprof does not:
// Parca's sequential IDs, Alloy's non-zero addresses, string 0 empty.
//   node check_profile.mjs FILE.pb.gz   -> prints "ok N samples" or the faults
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

const raw = readFileSync(process.argv[2]);
const p = Profile.decode(raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw);
const faults = [];
const strings = p.stringTable.strings;
const str = (i) => (i >= 0 && i < strings.length ? strings[i] : faults.push(`string index ${i} out of range`));

if (strings[0] !== '') faults.push('string_table[0] is not ""');
for (const [name, list] of [['mapping', p.mapping], ['location', p.location], ['function', p.function]])
  list.forEach((x, i) => { if (Number(x.id) !== i + 1) faults.push(`${name} ${i} has id ${x.id}, not ${i + 1}`); });
const nLoc = p.location.length, nFn = p.function.length, nMap = p.mapping.length;
for (const l of p.location) {
  if (!l.address || Number(l.address) === 0) faults.push(`location ${l.id} has address 0`);
  if (Number(l.mappingId) > nMap) faults.push(`location ${l.id} has unknown mapping ${l.mappingId}`);
  if (l.line.length === 0) faults.push(`location ${l.id} has no function`);
  for (const ln of l.line)
    if (Number(ln.functionId) < 1 || Number(ln.functionId) > nFn) faults.push(`location ${l.id}: bad function id`);
}
for (const f of p.function) if (!str(Number(f.name))) faults.push(`function ${f.id} has no name`);
for (const m of p.mapping) {
  if (!str(Number(m.filename))) faults.push(`mapping ${m.id} has no file name`);
  if (!m.hasFunctions) faults.push(`mapping ${m.id} lacks has_functions`);
}
for (const s of p.sample) {
  if (s.value.length !== p.sampleType.length) faults.push('sample value count differs from sample types');
  for (const id of s.locationId) if (Number(id) < 1 || Number(id) > nLoc) faults.push(`sample refers to location ${id}`);
  for (const lb of s.label) if (!Number(lb.key)) faults.push('label with key 0');
}
if (!p.timeNanos) faults.push('time_nanos unset');
if (faults.length) {
  console.log([...new Set(faults)].slice(0, 20).join('\n'));
  process.exit(1);
}
console.log(`ok ${p.sample.length} samples`);
