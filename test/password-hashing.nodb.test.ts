// Password hashes and the database's fsync share libuv's threadpool: a burst of logins must leave
// a thread free, or every acknowledged write waits for a hash to finish.
import { stat } from 'node:fs/promises'
import { expect, it } from 'vitest'
import { hashPassword, verifyPassword } from '../src/account/password.js'
import { describe } from './harness.js'

describe('password hashing under a burst', () => {
  it('leaves a threadpool thread free: a file system call answers before any of eight hashes', async () => {
    const order: string[] = []
    const hashes = Array.from({ length: 8 }, (_, i) => hashPassword(`password-${i}`).then((h) => (order.push('hash'), h)))
    // stat runs on the threadpool like fsync; with every thread hashing it would wait for one
    const fs = stat(import.meta.filename).then(() => order.push('fs'))
    const all = await Promise.all(hashes)
    await fs
    expect(order[0]).toBe('fs')
    expect(order.filter((x) => x === 'hash')).toHaveLength(8)
    // every hash is still right, whatever the queueing
    expect(await verifyPassword('password-3', all[3])).toBe(true)
    expect(await verifyPassword('password-4', all[3])).toBe(false)
  })
})
