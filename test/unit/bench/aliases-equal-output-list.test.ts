/**
 * bench/run.ts compares the patched list of 1,000 missions with the pass-through of a list as large as
 * that patched output (`EQUAL_OUTPUT_ITEMS`): the constant must keep matching the patch's real output.
 */
import { describe, expect, it } from 'vitest';
import { EQUAL_OUTPUT_ITEMS, generateMissionList } from '../../../bench/lib/upstream.ts';
import { patchJson } from '../../../src/aliases/patch-json.ts';
import { responsePairs } from '../../../src/aliases/table.ts';

const bytesOf = (items: number) => Buffer.from(JSON.stringify(generateMissionList(items)));

describe('EQUAL_OUTPUT_ITEMS', () => {
  it('makes a list within one mission of the patched list of 1,000', () => {
    const patched = patchJson(responsePairs(), bytesOf(1000));
    expect(patched.outcome.kind).toBe('patched');
    const missionBytes = bytesOf(2).length - bytesOf(1).length;
    const difference = bytesOf(EQUAL_OUTPUT_ITEMS).length - patched.body.length;
    expect(Math.abs(difference)).toBeLessThan(missionBytes);
    // Sanity: the patch made the list much larger, so the comparison is not the list itself.
    expect(patched.body.length / bytesOf(1000).length).toBeGreaterThan(1.6);
  });
});
