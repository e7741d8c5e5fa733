import { randomBytes } from 'node:crypto';

// Crockford's base32, as ULIDs use it.
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * A monotonic ULID factory: 10 characters of millisecond time, 16 of randomness; within one
 * millisecond (or if the clock steps back) the randomness of the previous id is incremented, so
 * ids from one factory always sort in creation order. The engine makes its message ids the same
 * way (`msg_` + monotonic ULID).
 */
export function monotonicUlid() {
  let lastTime = -1;
  let lastRandom = null; // 16 digits, base 32, most significant first

  return function ulid(now = Date.now()) {
    if (now > lastTime || lastRandom === null) {
      lastTime = now;
      const bytes = randomBytes(16);
      lastRandom = Array.from(bytes, (b) => b & 31);
    } else {
      increment(lastRandom);
    }
    return encodeTime(lastTime) + lastRandom.map((d) => ALPHABET[d]).join('');
  };
}

function increment(digits) {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i] < 31) {
      digits[i]++;
      return;
    }
    digits[i] = 0;
  }
  throw new Error('ULID randomness overflowed within one millisecond');
}

function encodeTime(ms) {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}
