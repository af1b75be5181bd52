export async function concat(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  for await (const c of chunks) parts.push(c)
  return Buffer.concat(parts)
}
