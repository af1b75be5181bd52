// Backup objects leave the machine sealed with AES-256-GCM under the operator's key: a bucket's
// reader learns nothing of the signing keys and password hashes inside, and a changed, truncated
// or swapped object fails to open instead of restoring. An object is
//   "PDSBKUP1" | key id (8 bytes) | nonce (12 bytes) | ciphertext | tag (16 bytes)
// with the object's path inside the backup as additional data, so one file cannot pass for
// another. The key id (a hash of the key, not the key) says which key sealed it: a restore takes
// the current key or the previous one, so keys can be rotated without re-encrypting old backups.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { chmod, open, rm, stat } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { UsageError } from './args.js'

const MAGIC = Buffer.from('PDSBKUP1')
const ID_BYTES = 8
const NONCE_BYTES = 12
const TAG_BYTES = 16
const HEADER_BYTES = MAGIC.length + ID_BYTES + NONCE_BYTES
/** what sealing adds to a file's size */
export const SEAL_OVERHEAD = HEADER_BYTES + TAG_BYTES

export const keyId = (key: Buffer) => createHash('sha256').update('pds backup key\0').update(key).digest().subarray(0, ID_BYTES)

const aad = (path: string) => Buffer.from(`pds backup object\0${path}`)

/** `file` sealed under `key` as a stream of SEAL_OVERHEAD + its size bytes; `path` is its name inside the backup */
export function sealedStream(file: string, path: string, key: Buffer): Readable {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  cipher.setAAD(aad(path))
  async function* parts() {
    yield Buffer.concat([MAGIC, keyId(key), nonce])
    for await (const chunk of createReadStream(file)) yield cipher.update(chunk as Buffer)
    yield cipher.final()
    yield cipher.getAuthTag()
  }
  return Readable.from(parts(), { objectMode: false })
}

/**
 * opens the sealed `from` into `to` (created 0600) with whichever of `keys` sealed it; a clear
 * UsageError naming `label` when it is not sealed, sealed under another key, or altered. Nothing
 * is left at `to` unless it opened.
 */
export async function openSealed(from: string, to: string, path: string, label: string, keys: { key: Buffer; name: string }[]) {
  const size = (await stat(from)).size
  const fh = await open(from, 'r')
  const header = Buffer.alloc(HEADER_BYTES)
  const tag = Buffer.alloc(TAG_BYTES)
  try {
    if (size >= SEAL_OVERHEAD) {
      await fh.read(header, 0, HEADER_BYTES, 0)
      await fh.read(tag, 0, TAG_BYTES, size - TAG_BYTES)
    }
  } finally {
    await fh.close()
  }
  if (size < SEAL_OVERHEAD || !header.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new UsageError(`${label} is not an encrypted backup object; refusing to restore it`)
  }
  const id = header.subarray(MAGIC.length, MAGIC.length + ID_BYTES)
  const key = keys.find((k) => keyId(k.key).equals(id))
  if (!key) {
    throw new UsageError(`${label} was encrypted with another key than ${keys.map((k) => k.name).join(' or ')}`)
  }
  const decipher = createDecipheriv('aes-256-gcm', key.key, header.subarray(MAGIC.length + ID_BYTES))
  decipher.setAAD(aad(path))
  decipher.setAuthTag(tag)
  const body = size > SEAL_OVERHEAD ? createReadStream(from, { start: HEADER_BYTES, end: size - TAG_BYTES - 1 }) : Readable.from([])
  try {
    await pipeline(body, decipher, createWriteStream(to, { mode: 0o600 }))
    await chmod(to, 0o600)
  } catch (err) {
    await rm(to, { force: true })
    if (err instanceof Error && /authenticate/i.test(err.message)) {
      throw new UsageError(`${label} failed authentication: it was altered or damaged after the backup; refusing to restore it`)
    }
    throw err
  }
}
