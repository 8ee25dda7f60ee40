/** What `fn` throws (synchronously); a test expecting a throw that does not come fails here. */
export function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}
