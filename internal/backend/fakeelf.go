/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package backend

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
)

// fakeSharedObject is the smallest x86-64 ELF shared object that tools
// take for a library named soname: an ELF header, a PT_LOAD and a
// PT_DYNAMIC program header, a dynamic section with DT_SONAME, and the
// section headers that Go's debug/elf reads it through. NVIDIA's container
// toolkit reads the SONAME of the fake driver's libraries to make their
// libcuda.so.1-style links, and ldconfig (run by the ld cache hook in the
// container) puts them in the container's ld cache by it. There is no
// code: loading one fails, as it should for a fake driver.
func fakeSharedObject(soname string) []byte {
	const (
		ehSize  = 64
		phSize  = 56
		shSize  = 64
		dynSize = 16
	)
	le := binary.LittleEndian
	dynstr := append(append([]byte{0}, soname...), 0)
	shstr := []byte("\x00.dynstr\x00.dynamic\x00.shstrtab\x00")
	const nameDynstr, nameDynamic, nameShstrtab = 1, 9, 18

	dynstrOff := uint64(ehSize + 2*phSize)
	dynamicOff := align8(dynstrOff + uint64(len(dynstr)))
	dynamic := []struct{ tag, val uint64 }{
		{uint64(elf.DT_SONAME), 1},
		{uint64(elf.DT_STRTAB), dynstrOff},
		{uint64(elf.DT_STRSZ), uint64(len(dynstr))},
		{uint64(elf.DT_NULL), 0},
	}
	shstrOff := dynamicOff + uint64(len(dynamic)*dynSize)
	shOff := align8(shstrOff + uint64(len(shstr)))
	fileSize := shOff + 4*shSize

	var b bytes.Buffer
	put := func(v any) { _ = binary.Write(&b, le, v) }
	pad := func(to uint64) {
		for uint64(b.Len()) < to {
			b.WriteByte(0)
		}
	}
	// ELF header.
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	pad(16)
	put(uint16(elf.ET_DYN))
	put(uint16(elf.EM_X86_64))
	put(uint32(elf.EV_CURRENT))
	put(uint64(0))      // entry
	put(uint64(ehSize)) // program headers
	put(shOff)          // section headers
	put(uint32(0))      // flags
	put(uint16(ehSize)) // header size
	put(uint16(phSize)) // program header size
	put(uint16(2))      // program headers
	put(uint16(shSize)) // section header size
	put(uint16(4))      // section headers
	put(uint16(3))      // index of .shstrtab
	// PT_LOAD: the whole file, read-only, at address 0.
	put(uint32(elf.PT_LOAD))
	put(uint32(elf.PF_R))
	put(uint64(0))
	put(uint64(0))
	put(uint64(0))
	put(fileSize)
	put(fileSize)
	put(uint64(0x1000))
	// PT_DYNAMIC.
	put(uint32(elf.PT_DYNAMIC))
	put(uint32(elf.PF_R))
	put(dynamicOff)
	put(dynamicOff)
	put(dynamicOff)
	put(uint64(len(dynamic) * dynSize))
	put(uint64(len(dynamic) * dynSize))
	put(uint64(8))
	// .dynstr, .dynamic, .shstrtab.
	b.Write(dynstr)
	pad(dynamicOff)
	for _, d := range dynamic {
		put(d.tag)
		put(d.val)
	}
	b.Write(shstr)
	pad(shOff)
	section := func(name, typ uint32, flags, off, size uint64, link uint32, align, entsize uint64) {
		put(name)
		put(typ)
		put(flags)
		put(off) // address = offset: loaded at 0
		put(off)
		put(size)
		put(link)
		put(uint32(0))
		put(align)
		put(entsize)
	}
	section(0, 0, 0, 0, 0, 0, 0, 0)
	section(nameDynstr, uint32(elf.SHT_STRTAB), uint64(elf.SHF_ALLOC), dynstrOff, uint64(len(dynstr)), 0, 1, 0)
	section(nameDynamic, uint32(elf.SHT_DYNAMIC), uint64(elf.SHF_ALLOC|elf.SHF_WRITE), dynamicOff, uint64(len(dynamic)*dynSize), 1, 8, dynSize)
	section(nameShstrtab, uint32(elf.SHT_STRTAB), 0, shstrOff, uint64(len(shstr)), 0, 1, 0)
	return b.Bytes()
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }
